// The plan card: turnplan's generative UI component (`push_ui_message("plan", ...)` in
// agent/turn/plan_card.py). agent-chat-ui loads it from the dev server when turnplan runs with
// `langgraph dev --config langgraph.ui.json`; turnplan's own UI (App.tsx) shows it under the checklist.
import React from "react";

export type Todo = {
  id: string;
  title: string;
  content?: string;
  status: "pending" | "in_progress" | "completed" | "cancelled";
  outcome?: string | null;
};

export type PlanCardProps = {
  turnId: string;
  todos: Todo[];
  turnStatus?: string;
  llmCalls?: number;
};

export const MARKS: Record<Todo["status"], string> = {
  pending: "☐",
  in_progress: "▶",
  completed: "☑",
  cancelled: "☒",
};

export function PlanCard({ todos, turnStatus, llmCalls }: PlanCardProps) {
  const done = todos.filter((t) => t.status === "completed").length;
  return (
    <div className="plan-card" data-testid="plan-card" style={{ border: "1px solid #ccd", borderRadius: 8, padding: 8, margin: "6px 0", background: "#f7f8fc" }}>
      <div style={{ fontWeight: 600 }}>
        Plan: {done}/{todos.length} done · {turnStatus ?? "running"}
        {llmCalls !== undefined ? ` · ${llmCalls} LLM calls` : ""}
      </div>
      <ul style={{ listStyle: "none", paddingLeft: 4, margin: 4 }}>
        {todos.map((t) => (
          <li key={t.id} data-status={t.status}>
            {MARKS[t.status] ?? "?"} {t.content ?? t.title}
            {t.outcome ? <em style={{ color: "#667" }}> — {t.outcome}</em> : null}
          </li>
        ))}
      </ul>
    </div>
  );
}

// The name the server pushes; langgraph-ui bundles this file's default export.
export default { plan: PlanCard };
