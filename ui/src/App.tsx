// turnplan's web UI: chat through assistant-ui's LangGraph runtime, the turn's plan as a live
// checklist, the plan approval and ask_user interrupts as buttons and a form, plan edits
// (`planEdits`) as cancel and add buttons, and the turn's status and cost when it ends.
//
// Interrupts come in two shapes and both are answered in the shape they came in: LangChain's
// HITL request (`action_requests` / `review_configs`, resumed with `{"decisions": [...]}`) and
// turnplan's short form (`{"type": "plan_approval" | "question", ...}`, resumed with
// `{"action": ...}` or the answer's text).
import React, { useMemo, useRef, useState } from "react";
import {
  AssistantRuntimeProvider,
  ComposerPrimitive,
  MessagePrimitive,
  ThreadPrimitive,
  type ToolCallMessagePartComponent,
} from "@assistant-ui/react";
import {
  useLangGraphInterruptState,
  useLangGraphRuntime,
  useLangGraphSendCommand,
  useLangGraphSetState,
  useLangGraphState,
  useLangGraphUIMessages,
  type LangChainMessage,
} from "@assistant-ui/react-langgraph";
import type { Client } from "@langchain/langgraph-sdk";
import { makeClient, savedToken, saveToken } from "./connection";
import { MARKS, PlanCard, type PlanCardProps, type Todo } from "./PlanCard";

const GRAPH = "supervisor";
/** The reason a cancelled row gets when the user types none. */
const DEFAULT_CANCEL_REASON = "Cancelled in the web UI";
const API_URL = `${window.location.origin}/api`;

type Values = {
  todos?: Todo[];
  turnId?: string;
  turnStatus?: string;
  llmCalls?: number;
  ui?: { name: string; props: unknown }[];
  messages?: { type: string; usage_metadata?: { input_tokens?: number; output_tokens?: number } }[];
};

export function App() {
  const [approvePlan, setApprovePlan] = useState(true);
  const approveRef = useRef(approvePlan);
  approveRef.current = approvePlan;
  const threadRef = useRef<string | undefined>(undefined);
  const [reasked, setReasked] = useState<Reasked | null>(null);
  // The bearer token for a server with TURNPLAN_AUTH_TOKENS (connection.ts); every request
  // reads the current client, so a token typed in mid-session applies to the next request.
  const [token, setToken] = useState(() => savedToken(window.localStorage));
  const clientRef = useRef<Client>(makeClient(API_URL, token));
  const changeToken = (value: string) => {
    setToken(value);
    saveToken(window.localStorage, value);
    clientRef.current = makeClient(API_URL, value);
  };

  const runtime = useLangGraphRuntime({
    create: async () => {
      const thread = await clientRef.current.threads.create();
      threadRef.current = thread.thread_id;
      return { externalId: thread.thread_id };
    },
    load: async (threadId: string) => {
      const state = await clientRef.current.threads.getState<Record<string, unknown>>(threadId);
      const values = (state.values ?? {}) as Record<string, unknown>;
      return {
        messages: (values.messages as LangChainMessage[]) ?? [],
        interrupts: state.tasks?.[0]?.interrupts ?? [],
      };
    },
    stream: async function* (messages, { command, initialize, abortSignal }) {
      const { externalId } = await initialize();
      if (!externalId) throw new Error("no thread");
      threadRef.current = externalId;
      yield* clientRef.current.runs.stream(externalId, GRAPH, {
        input: messages.length > 0 ? { messages } : null,
        // A resume must not change the run's context; a new turn says whether to ask first.
        ...(command ? { command } : { context: { approve_plan: approveRef.current } }),
        streamMode: ["values", "updates", "custom"],
        signal: abortSignal,
      });
    },
    eventHandlers: { onCustomEvent: () => undefined }, // turnplan.todo events: the plan card has them
  });

  return (
    <AssistantRuntimeProvider runtime={runtime}>
      <div className="layout">
        <main className="chat">
          <h1>turnplan</h1>
          <label className="option">
            <input
              type="checkbox"
              checked={approvePlan}
              onChange={(e) => setApprovePlan(e.target.checked)}
            />{" "}
            Ask me to approve each plan
          </label>
          <label className="option">
            Token{" "}
            <input
              type="password"
              aria-label="Token"
              placeholder="only if the server has TURNPLAN_AUTH_TOKENS"
              value={token}
              onChange={(e) => changeToken(e.target.value)}
            />
          </label>
          <ThreadPrimitive.Root className="thread">
            <ThreadPrimitive.Viewport className="viewport">
              <ThreadPrimitive.Messages components={{ UserMessage, AssistantMessage }} />
            </ThreadPrimitive.Viewport>
            <Interrupt reasked={reasked} />
            <ComposerPrimitive.Root className="composer">
              <ComposerPrimitive.Input
                className="composer-input"
                placeholder="Ask turnplan to do something…"
                aria-label="Message"
              />
              <ComposerPrimitive.Send className="send">Send</ComposerPrimitive.Send>
            </ComposerPrimitive.Root>
          </ThreadPrimitive.Root>
        </main>
        <aside className="side">
          <Plan threadRef={threadRef} clientRef={clientRef} onReasked={setReasked} />
        </aside>
      </div>
    </AssistantRuntimeProvider>
  );
}

function UserMessage() {
  return (
    <MessagePrimitive.Root className="msg user" data-testid="user-message">
      <MessagePrimitive.Parts />
    </MessagePrimitive.Root>
  );
}

/** A tool call in the chat: its name and arguments, one line (the plan shows the rest). */
const ToolCall: ToolCallMessagePartComponent = ({ toolName, args }) => (
  <div className="tool-call" data-testid="tool-call">
    → {toolName}({JSON.stringify(args).slice(0, 120)})
  </div>
);

function AssistantMessage() {
  return (
    <MessagePrimitive.Root className="msg assistant" data-testid="assistant-message">
      <MessagePrimitive.Parts components={{ tools: { Fallback: ToolCall } }} />
    </MessagePrimitive.Root>
  );
}

/** A pause asked again by a plan edit (the run that edits the plan is not the chat's, so the
 * runtime keeps the value it had): `value`, shown while the runtime's pause is still `over`. */
type Reasked = { over: string; value: unknown };

/** The turn's plan: the live card the server pushes (generative UI), else `values.todos`. */
function Plan({
  threadRef,
  clientRef,
  onReasked,
}: {
  threadRef: React.MutableRefObject<string | undefined>;
  clientRef: React.MutableRefObject<Client>;
  onReasked: (reasked: Reasked | null) => void;
}) {
  const values = (useLangGraphState<Values>() ?? {}) as Values;
  const interrupt = useLangGraphInterruptState();
  const setValues = useLangGraphSetState<Values>();
  const cards = useLangGraphUIMessages();
  const [title, setTitle] = useState("");
  // The row whose Cancel was clicked: it asks for a reason (the default if left empty).
  const [cancelling, setCancelling] = useState<string | null>(null);
  const [cancelReason, setCancelReason] = useState("");
  const [error, setError] = useState<string | null>(null);
  const card = useMemo(() => {
    // `values.ui` first: a plan edit's run (not the chat's stream) leaves its card only there.
    const fromValues = (values.ui ?? []).filter((c) => c.name === "plan");
    const own = fromValues.length > 0 ? fromValues : cards.filter((c) => c.name === "plan");
    const latest = own.length > 0 ? (own[own.length - 1].props as PlanCardProps) : undefined;
    return latest && latest.turnId === values.turnId ? latest : undefined;
  }, [cards, values.ui, values.turnId]);
  // Values arrive after each step, the card with each plan change: show the fresher one.
  const todos = values.todos && values.todos.length > 0 ? values.todos : card?.todos ?? [];
  const turnStatus = values.turnStatus ?? card?.turnStatus;

  async function edit(planEdits: Record<string, unknown>[]) {
    const thread = threadRef.current;
    if (!thread) return;
    setError(null);
    try {
      const result = (await clientRef.current.runs.wait(thread, GRAPH, {
        input: { planEdits },
      })) as Values & { __error__?: { message?: string } };
      if (result?.__error__) {
        setError(result.__error__.message ?? "the edit was refused");
        return;
      }
      setValues((previous) => ({ ...(previous ?? {}), ...result }));
      // A paused turn is asked again with the edited plan: show that pause, not the old one.
      const state = await clientRef.current.threads.getState(thread);
      const pending = (state.tasks ?? []).flatMap((task) => task.interrupts ?? [])[0];
      onReasked(pending && interrupt ? { over: JSON.stringify(interrupt.value), value: pending.value } : null);
    } catch (problem) {
      setError(String(problem));
    }
  }

  const tokens = (values.messages ?? []).reduce(
    (sum, m) => sum + (m.usage_metadata?.input_tokens ?? 0) + (m.usage_metadata?.output_tokens ?? 0),
    0,
  );
  const ended = turnStatus !== undefined && turnStatus !== "running";
  return (
    <section data-testid="plan">
      <h2>Plan</h2>
      {todos.length === 0 ? <p className="muted">No plan for this turn.</p> : null}
      <ul className="checklist">
        {todos.map((t) => (
          <li key={t.id} data-testid="plan-row" data-status={t.status}>
            <span className="mark">{MARKS[t.status] ?? "?"}</span>{" "}
            <span className={t.status === "cancelled" ? "struck" : ""}>{t.content ?? t.title}</span>
            {t.outcome ? <div className="outcome">{t.outcome}</div> : null}
            {(t.status === "pending" || t.status === "in_progress") && cancelling !== t.id ? (
              <button
                className="small"
                onClick={() => {
                  setCancelling(t.id);
                  setCancelReason("");
                }}
              >
                Cancel
              </button>
            ) : null}
            {(t.status === "pending" || t.status === "in_progress") && cancelling === t.id ? (
              <form
                className="cancel-row"
                onSubmit={(e) => {
                  e.preventDefault();
                  setCancelling(null);
                  void edit([{ op: "cancel", id: t.id, reason: cancelReason.trim() || DEFAULT_CANCEL_REASON }]);
                }}
              >
                <input
                  autoFocus
                  value={cancelReason}
                  onChange={(e) => setCancelReason(e.target.value)}
                  placeholder={DEFAULT_CANCEL_REASON}
                  aria-label="Cancel reason"
                />
                <button type="submit" className="small">
                  Cancel row
                </button>
                <button type="button" className="small" onClick={() => setCancelling(null)}>
                  Keep
                </button>
              </form>
            ) : null}
          </li>
        ))}
      </ul>
      {todos.length > 0 ? (
        <form
          className="add-row"
          onSubmit={(e) => {
            e.preventDefault();
            if (title.trim()) void edit([{ op: "add", title: title.trim() }]);
            setTitle("");
          }}
        >
          <input value={title} onChange={(e) => setTitle(e.target.value)} placeholder="Add a row" aria-label="New row" />
          <button type="submit">Add</button>
        </form>
      ) : null}
      {error ? <p className="error" role="alert">{error}</p> : null}
      <div className="status" data-testid="turn-status">
        {turnStatus ? `Turn: ${turnStatus}` : ""}
        {ended && values.llmCalls !== undefined ? ` · ${values.llmCalls} LLM calls` : ""}
        {ended && tokens > 0 ? ` · ${tokens} tokens` : ""}
      </div>
      {card ? <PlanCard {...card} /> : null}
    </section>
  );
}

type HitlRequest = {
  action_requests: { name: string; args: Record<string, unknown>; description?: string }[];
  review_configs?: { action_name: string; allowed_decisions: string[] }[];
};
type ShortForm = {
  type: "plan_approval" | "question";
  items?: Todo[];
  question?: string;
  options?: string[] | null;
  error?: string;
};

/** The pending interrupt as controls: a plan to approve, edit or reject; a question to answer. */
function Interrupt({ reasked }: { reasked: Reasked | null }) {
  const interrupt = useLangGraphInterruptState();
  const send = useLangGraphSendCommand();
  const [answer, setAnswer] = useState("");
  const [reason, setReason] = useState("");
  const [editing, setEditing] = useState<string | null>(null);
  const current = reasked && interrupt && reasked.over === JSON.stringify(interrupt.value) ? reasked.value : interrupt?.value;
  const value = current as HitlRequest | ShortForm | undefined;
  if (!value) return null;
  // assistant-ui types the resume as a string; the server takes any JSON value.
  const resume = (payload: unknown) => void send({ resume: payload as string });

  const hitl = "action_requests" in value ? value : undefined;
  const request = hitl?.action_requests[0];
  const isQuestion = hitl ? request?.name === "ask_user" : (value as ShortForm).type === "question";

  if (isQuestion) {
    const question = hitl ? String(request?.args.question ?? "") : (value as ShortForm).question;
    const options = (hitl ? (request?.args.options as string[] | undefined) : (value as ShortForm).options) ?? [];
    const reply = (text: string) =>
      resume(hitl ? { decisions: [{ type: "respond", message: text }] } : text);
    return (
      <div className="interrupt" data-testid="question">
        <strong>Question:</strong> {question}
        <div>
          {options.map((o) => (
            <button key={o} onClick={() => reply(o)}>
              {o}
            </button>
          ))}
        </div>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            reply(answer);
            setAnswer("");
          }}
        >
          <input value={answer} onChange={(e) => setAnswer(e.target.value)} aria-label="Answer" />
          <button type="submit">Answer</button>
        </form>
      </div>
    );
  }

  const items: { title: string }[] = hitl
    ? ((request?.args.items ?? request?.args.todos ?? []) as { title: string }[])
    : ((value as ShortForm).items ?? []);
  // The request's own name for the plan items (HITL args), so an edit sends them back under it.
  const itemsKey = request?.args && "todos" in request.args && !("items" in request.args) ? "todos" : "items";
  const approve = () => resume(hitl ? { decisions: [{ type: "approve" }] } : { action: "approve" });
  const reject = () => {
    const message = reason.trim() || "Rejected in the web UI";
    resume(hitl ? { decisions: [{ type: "reject", message }] } : { action: "reject", reason: message });
  };
  const saveEdit = () => {
    const edited = (editing ?? "")
      .split("\n")
      .map((line) => line.trim())
      .filter(Boolean)
      .map((title) => ({ title }));
    resume(
      hitl
        ? { decisions: [{ type: "edit", edited_action: { name: request?.name ?? "create_todo", args: { ...request?.args, [itemsKey]: edited } } }] }
        : { action: "edit", items: edited },
    );
    setEditing(null);
  };
  return (
    <div className="interrupt" data-testid="approval">
      <strong>Approve this plan?</strong>
      {"error" in value && value.error ? <p className="error">{value.error}</p> : null}
      {editing === null ? (
        <ol>
          {items.map((item, i) => (
            <li key={i}>{item.title}</li>
          ))}
        </ol>
      ) : (
        <textarea
          aria-label="Plan items, one a line"
          rows={Math.max(3, items.length + 1)}
          value={editing}
          onChange={(e) => setEditing(e.target.value)}
        />
      )}
      <div className="buttons">
        {editing === null ? (
          <>
            <button onClick={approve}>Approve</button>
            <button onClick={() => setEditing(items.map((i) => i.title).join("\n"))}>Edit</button>
            <input value={reason} onChange={(e) => setReason(e.target.value)} placeholder="Reason" aria-label="Reason" />
            <button onClick={reject}>Reject</button>
          </>
        ) : (
          <>
            <button onClick={saveEdit}>Save and approve</button>
            <button onClick={() => setEditing(null)}>Back</button>
          </>
        )}
      </div>
    </div>
  );
}
