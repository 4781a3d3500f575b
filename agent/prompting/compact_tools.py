"""The compact profile's tools: what one LLM call may call when the model is a small local one.

The profile itself (its system prompt, plan view and history, as data) is
``agent.prompting.builder.COMPACT``; this module binds each step's tools.

Why: the full profile (the whole system prompt and every tool schema on every call) is about
2,000 prompt tokens, which the embedded Gemma 3 270M reads at 100-200 tokens/s on two CPU
cores, and with nine tools to choose from it wrote tool names as plan titles. Measured levers
that help it, all applied here and none specific to one request:

- a short system prompt (``prompts/compact_supervisor.md``) and a plan view without ids;
- the plan made from the user's own words (``agent.prompting.compact_plan``): each step of the
  request gets the tool its verb names, the model choosing only where no verb decides, and the
  row records its planned action; a one-step request under planning ``auto`` is done without a
  plan, and a request no tool can do is answered plainly;
- only the tools the step needs, decided from the plan rows and the history: an item planned
  with a tool is offered that tool alone, and when the user's words fix every argument the
  harness makes the call itself (``StepBinding.reply``, no model call); an item planned some
  other way gets the domain tools (and ``complete_todo`` for items no tool can do); once its
  action has returned, the harness closes it from the result (completed with the tool's report,
  or cancelled with the error); with every item closed the answer is built from the rows;
- compact tool schemas: required arguments and closed choices (enums) only, every free string
  capped, so the JSON-schema grammar llama.cpp builds from a forced tool keeps each call short;
  the id of the item in progress is a constant in ``complete_todo``'s schema, so the model never
  has to copy a UUID;
- one forced call per action: the step's tools become the variants of a single ``use_tool``
  function (``{"name": <tool>, "arguments": {...}}``), which llama.cpp turns into one grammar,
  and the answer is unwrapped into the real tool call. (llama-cpp-python's automatic tool
  choice makes several completions per call, ignores the token cap and produced invalid JSON.)
- grounded arguments: the free-text arguments of the domain tools (a task title, a task name)
  are chosen from the item in progress and the user's quoted words, and a successful action's
  outcome from its tool result, not written freely. The
  270M model, left free, wrote the tool's own description as the title ("Add task to my tasks
  list"); the cost is that this profile cannot invent text the user and the plan did not say.
- an explicit ``tool_choice`` on every call with tools (llama-cpp-python's
  ``chatml-function-calling`` ignores tools without one), a low temperature and token caps;
- no ``ask_user``: in a forced choice among the step's tools a small model could pick it at
  random, which would pause an unattended run for an answer nobody gives;
- a short history window, so the stable prefix (system prompt) dominates and llama.cpp's
  prefix reuse skips most of each prompt.

The tools the model calls are the real ones (only their schemas are shortened), so rows, audit
and errors behave exactly as in the full profile.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from agent.prompting.compact_arithmetic import arithmetic_answer
from agent.prompting.compact_languages import in_english, looks_foreign
from agent.prompting.compact_lookup import (
    candidate_tasks,
    content_stems,
    is_lookup,
    looked_up,
    lookup_call,
    lookup_tool,
    matching_task,
    task_reference,
)
from agent.prompting.compact_plan import (
    NO_TOOL_OUTCOME,
    NOT_AN_ACTION,
    PLAN_TOOL,
    PlannedAction,
    agent_type,
    doubtful_step,
    named_tasks,
    plan_items,
    plan_steps_tool,
    planned_action,
    planning_tools,
    step_candidates,
    steps_by_verb,
    stored_action,
    whole_request_items,
)
from agent.prompting.compact_verbs import CONTINUE_VERBS, tool_entry
from agent.prompting.request_steps import (
    QUOTED,
    RequestStep,
    is_conversation,
    negated,
    refers_back,
    request_steps,
    retraction,
    verb_at_start,
)
from agent.tool_names import ASK_USER, CONTINUE_OPEN_TODOS, TODO_TOOL_NAMES
from agent.turn.outcome import not_done_answer, plan_finished_message
from prompts import Prompts
from prompts import chosen as texts_of
from storage.models import TurnTodo

MAX_STRING_LENGTH = 120
"""Cap on every free string argument in a compact schema (titles, outcomes, identifiers)."""

MAX_LISTING_LENGTH = 1500
"""Cap on a list step's outcome, which names every task listed (the answer shows it)."""

MAX_QUESTION_OPTIONS = 20
"""Tasks offered as answers to the harness's question at most (``ask_user``'s own cap)."""
MAX_OPTION_LENGTH = 200
"""An option's length at most (``ask_user``'s own cap)."""

ACTION_ATTEMPTS = 2
"""Failed actions on one item before the model must close it (completed or cancelled)."""

TEMPERATURE = 0.2
PLAN_MAX_TOKENS = 200
ACTION_MAX_TOKENS = 120
ANSWER_MAX_TOKENS = 120

Phase = Literal["plan", "act", "close", "answer"]

DELEGATE = "delegate"
"""The supervisor's tool that hands an item to a worker (``agent.tools.delegate``)."""

DISPATCH_TOOL = "use_tool"
"""The one function the act step offers; its variants are the step's real tools."""


def compact_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON schema with only required properties and closed choices, strings capped.

    Optional free-text fields (a task's description, a todo's context) are where a small model
    rambles; dropping them from the schema keeps the grammar, and so the call, short. Tools
    still accept them from models that get the full schema.
    """
    result: dict[str, Any] = {
        key: value for key, value in schema.items() if key not in ("description", "default")
    }
    if "enum" in result or "const" in result:
        return result
    if result.get("type") == "string":
        result["maxLength"] = min(
            int(result.get("maxLength", MAX_STRING_LENGTH)), MAX_STRING_LENGTH
        )
    if "properties" in schema:
        required = set(schema.get("required", []))
        result["properties"] = {
            name: compact_schema(prop)
            for name, prop in schema["properties"].items()
            if name in required or _is_closed_choice(prop)
        }
        result["required"] = [name for name in schema.get("required", []) if name in required]
    if isinstance(schema.get("items"), Mapping):
        result["items"] = compact_schema(schema["items"])
    if "anyOf" in schema:
        result["anyOf"] = [compact_schema(option) for option in schema["anyOf"]]
    return result


def _is_closed_choice(prop: Mapping[str, Any]) -> bool:
    options = [prop, *prop.get("anyOf", [])]
    return any("enum" in option or "const" in option for option in options)


def compact_tool(tool: BaseTool, *, todo_id: str | None = None) -> dict[str, Any]:
    """The OpenAI tool definition of ``tool`` with a compact schema and its first docstring line.

    ``todo_id`` pins ``complete_todo``'s ``todoId`` to the item in progress.
    """
    definition = convert_to_openai_tool(tool)
    function = definition["function"]
    parameters = compact_schema(function.get("parameters", {"type": "object"}))
    if todo_id is not None and "todoId" in parameters.get("properties", {}):
        parameters["properties"]["todoId"] = {"const": todo_id}
    description = (function.get("description") or "").strip().splitlines()
    return {
        "type": "function",
        "function": {
            "name": function["name"],
            "description": description[0] if description else "",
            "parameters": parameters,
        },
    }


def _since_last_todo_result(history: Sequence[AnyMessage]) -> list[ToolMessage]:
    """Results of non-todo tools after the newest todo-tool result or user message (the
    current item's work, or a direct action's in a turn without a plan), newest first. The
    harness's lookups (``agent.prompting.compact_lookup``) and the user's answers to its
    questions (which task they mean) are no action and are left out."""
    results: list[ToolMessage] = []
    for message in reversed(history):
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, ToolMessage):
            if message.name in TODO_TOOL_NAMES or message.name == CONTINUE_OPEN_TODOS:
                break
            if not is_lookup(message) and message.name != ASK_USER:
                results.append(message)
    return results


def _payload(result: ToolMessage) -> dict[str, Any]:
    try:
        payload = json.loads(result.text)
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


def _listing(payload: Mapping[str, Any]) -> str | None:
    """``2 pending task(s): buy groceries; do laundry`` for a list result, else None."""
    items = payload.get("tasks", payload.get("items"))
    if not isinstance(items, list):
        return None
    titles = [str(item.get("title")) for item in items if isinstance(item, dict)]
    kind = payload.get("filter")
    which = f"{kind} " if isinstance(kind, str) and kind != "all" else ""
    listed = "; ".join(titles) if titles else "none"
    return f"{len(titles)} {which}task(s): {listed}"


def action_outcomes(history: Sequence[AnyMessage], prompts: Prompts | None = None) -> list[str]:
    """Outcomes to close the item with: one per successful action of the current item, e.g.
    ``add_task: buy groceries`` (the tool, and the title it reports), or for a list every title
    it returned, so the answer built from the rows shows what the user asked to see."""
    outcomes = []
    for result in reversed(_since_last_todo_result(history)):
        if _failed(result, prompts=prompts):
            continue
        payload = _payload(result)
        listing = _listing(payload)
        if listing is not None:
            outcome = f"{result.name}: {listing}"[:MAX_LISTING_LENGTH]
        elif isinstance(payload.get("result"), str):  # a worker's report, through delegate
            outcome = f"{payload.get('agentType', result.name)}: {payload['result']}"
            outcome = outcome[:MAX_STRING_LENGTH]
        elif isinstance(payload.get("title"), str):
            outcome = f"{result.name}: {payload['title']}"[:MAX_STRING_LENGTH]
        else:
            outcome = f"{result.name} succeeded"
        outcomes.append(outcome)
    return list(dict.fromkeys(outcomes))


def failure_outcome(history: Sequence[AnyMessage], prompts: Prompts | None = None) -> str:
    """Why the current item is cancelled: the last failed action's error, in a line."""
    failures = [
        result for result in _since_last_todo_result(history) if _failed(result, prompts=prompts)
    ]
    if not failures:
        return "no tool could do it"
    last = failures[0]
    payload = _payload(last)
    error = payload.get("error") if isinstance(payload.get("error"), dict) else payload
    message = error.get("message") if isinstance(error, dict) else None
    message = message or payload.get("result")  # a worker's "Not done: ..." report
    text = message if isinstance(message, str) and message else last.text
    return f"{last.name} failed: {' '.join(text.split())}"[:MAX_STRING_LENGTH]


def _action_succeeded(history: Sequence[AnyMessage], prompts: Prompts | None = None) -> bool:
    return any(not _failed(result, prompts=prompts) for result in _since_last_todo_result(history))


def _failed(result: ToolMessage, prompts: Prompts | None = None) -> bool:
    """An error, or a worker's report that its action failed (a compact worker answers
    ``direct_failed``: "Not done: ..."), so a delegated item is not closed as completed."""
    if result.status == "error":
        return True
    report = _payload(result).get("result") if result.name == DELEGATE else None
    not_done = texts_of(prompts).render("direct_failed", outcome="").strip()
    return isinstance(report, str) and report.strip().startswith(not_done)


def step_phase(
    rows: Sequence[TurnTodo],
    history: Sequence[AnyMessage],
    required_tool: str | None,
    prompts: Prompts | None = None,
) -> Phase:
    """What this call is for, from the plan rows and the history (pure, so it is testable)."""
    if required_tool is None and not rows and _since_last_todo_result(history):
        return "answer"  # a one-step request was done directly, without a plan
    if required_tool is not None or not rows:
        return "plan"
    current = next((row for row in rows if row.status == "in_progress"), None)
    if current is None:
        return "answer"
    results = _since_last_todo_result(history)
    attempts = 1 if planned_action(current) is not None else ACTION_ATTEMPTS
    if _action_succeeded(history, prompts=prompts) or len(results) >= attempts:
        return "close"
    return "act"


@dataclass(frozen=True)
class StepBinding:
    """The tools and sampling settings of one compact call.

    ``reply`` is set when the harness knows the step's message without asking the model (the
    close of an item whose action returned, an action whose arguments are all fixed by the
    user's words); ``plan_steps`` when the call is the plan, answered as one tool per step of
    the request and turned into ``create_todo``.
    """

    phase: Phase
    tools: list[dict[str, Any]]
    tool_choice: str | None
    max_tokens: int
    reply: AIMessage | None = None
    plan_steps: tuple[RequestStep, ...] = ()
    plan_decided: Mapping[str, str] = field(default_factory=dict)
    plan_required: bool = False
    plan_tools: tuple[BaseTool, ...] = ()
    plan_history: tuple[AnyMessage, ...] = ()
    """The turn so far, for a lone step the model names and the harness then does (its lookup
    result, once made, is there)."""
    plan_can_ask: bool = False
    """Whether that lone step may ask the user which task they mean (``ask_user`` is bound)."""


def _tool_call_message(name: str, args: dict[str, Any]) -> AIMessage:
    """A tool call the harness makes on the model's behalf (no model call)."""
    call_id = f"call_{uuid.uuid4().hex[:24]}"
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


def step_binding(
    tools: Sequence[BaseTool],
    rows: Sequence[TurnTodo],
    history: Sequence[AnyMessage],
    required_tool: str | None,
    request: str = "",
    prompts: Prompts | None = None,
) -> StepBinding:
    """Only the tools this step needs, and whether the model must call one of them."""
    phase = step_phase(rows, history, required_tool, prompts=prompts)
    by_name = {tool.name: tool for tool in tools}
    current = next((row for row in rows if row.status == "in_progress"), None)
    domain_tools = [
        tool for tool in tools if tool.name not in TODO_TOOL_NAMES and tool.name != ASK_USER
    ]
    if phase != "plan":  # a continuation is asked for in the request, so only its plan says so
        domain_tools = [tool for tool in domain_tools if tool.name != CONTINUE_OPEN_TODOS]
    if phase == "plan":
        steps = tuple(request_steps(in_english(request)))
        if steps and domain_tools and "create_todo" in by_name:
            return _plan_binding(
                steps,
                planning_tools(domain_tools),
                required_tool == "create_todo",
                history,
                can_ask=ASK_USER in by_name,
                prompts=prompts,
                request=request,
            )
        if required_tool is not None:
            return StepBinding(
                phase, [compact_tool(by_name[required_tool])], required_tool, PLAN_MAX_TOKENS
            )
        names = [name for name in by_name if name not in ("list_todo", "complete_todo", ASK_USER)]
        return StepBinding(
            phase, [compact_tool(by_name[name]) for name in names], "auto", PLAN_MAX_TOKENS
        )
    if phase == "answer" and not rows:
        return StepBinding(
            "answer", [], None, ANSWER_MAX_TOKENS, reply=direct_reply(history, prompts=prompts)
        )
    if phase == "answer" or current is None:
        return StepBinding("answer", [], None, ANSWER_MAX_TOKENS)
    if phase == "close":
        # The harness closes the item from what its action returned: completed with the tool's
        # own report, or cancelled with the error. (Offered the choice, a small model picked
        # "cancelled" at random and wrote "completed_todo" as the outcome; measured.)
        if _action_succeeded(history, prompts=prompts):
            args = {
                "todoId": current.id,
                "outcome": "; ".join(action_outcomes(history, prompts=prompts)),
            }
        else:
            args = {
                "todoId": current.id,
                "outcome": failure_outcome(history, prompts=prompts),
                "status": "cancelled",
            }
        return StepBinding(
            phase,
            [],
            "complete_todo",
            ACTION_MAX_TOKENS,
            reply=_tool_call_message("complete_todo", args),
        )
    return _act_binding(current, by_name, domain_tools, history, request, prompts=prompts)


def _act_binding(
    current: TurnTodo,
    by_name: Mapping[str, BaseTool],
    domain_tools: Sequence[BaseTool],
    history: Sequence[AnyMessage],
    request: str,
    prompts: Prompts | None = None,
) -> StepBinding:
    """The act step of the item in progress: its planned action (asked about first when it
    cannot be taken back and the words are not this turn's), its worker, or the model's choice
    among the domain tools with grounded strings."""
    planned = planned_action(current)
    if planned is not None and planned.tool == NOT_AN_ACTION:
        args = {"todoId": current.id, "outcome": NO_TOOL_OUTCOME, "status": "cancelled"}
        return StepBinding(
            "close",
            [],
            "complete_todo",
            ACTION_MAX_TOKENS,
            reply=_tool_call_message("complete_todo", args),
        )
    if planned is not None and planned.tool in by_name:
        unconfirmed = _unconfirmed(
            by_name[planned.tool], current, planned, history, request, prompts=prompts
        )
        if unconfirmed is not None:
            return unconfirmed
        return _planned_action_binding(
            by_name[planned.tool],
            planned,
            domain_tools,
            history,
            todo_id=current.id,
            can_ask=ASK_USER in by_name,
            prompts=prompts,
        )
    if planned is not None and current.agentType and DELEGATE in by_name:
        # A worker's tool: the harness hands the item to the worker its row names.
        reply = _tool_call_message(DELEGATE, {"todoId": current.id})
        return StepBinding("act", [], DELEGATE, ACTION_MAX_TOKENS, reply=reply)
    close = compact_tool(by_name["complete_todo"], todo_id=current.id)
    phrases = grounded_phrases(current, request)
    domain = [ground_strings(compact_tool(tool), phrases) for tool in domain_tools]
    return StepBinding("act", [dispatch_tool([*domain, close])], DISPATCH_TOOL, ACTION_MAX_TOKENS)


def _direct_action(
    items: Sequence[Mapping[str, Any]],
    tools: Sequence[BaseTool],
    history: Sequence[AnyMessage] = (),
    *,
    can_ask: bool = False,
    prompts: Prompts | None = None,
) -> AIMessage | None:
    """The call of a lone item whose arguments the user's words fix, made without a plan."""
    if len(items) != 1:
        return None
    action = stored_action(items[0].get("context"))
    by_name = {tool.name: tool for tool in tools}
    if action is None or action.tool not in by_name or agent_type(by_name[action.tool]):
        return None
    binding = _planned_action_binding(
        by_name[action.tool], action, tools, history, can_ask=can_ask, prompts=prompts
    )
    return binding.reply


def direct_answer(history: Sequence[AnyMessage], prompts: Prompts | None = None) -> str:
    """The answer of a one-step request done without a plan, from what its action returned."""
    outcomes = action_outcomes(history, prompts=prompts)
    if outcomes:
        return texts_of(prompts).render("direct_done", outcome="; ".join(outcomes))
    return texts_of(prompts).render(
        "direct_failed", outcome=failure_outcome(history, prompts=prompts)
    )


def direct_reply(history: Sequence[AnyMessage], prompts: Prompts | None = None) -> AIMessage:
    """``direct_answer`` as the turn's answer; a failed action's is marked not done, so the
    turn ends ``incomplete`` (``agent.turn.outcome.not_done_answer``), never ``answered``."""
    text = direct_answer(history, prompts=prompts)
    return (
        AIMessage(content=text)
        if action_outcomes(history, prompts=prompts)
        else not_done_answer(text)
    )


def _planned_action_binding(
    tool: BaseTool,
    planned: PlannedAction,
    tools: Sequence[BaseTool] = (),
    history: Sequence[AnyMessage] = (),
    *,
    todo_id: str | None = None,
    can_ask: bool = False,
    prompts: Prompts | None = None,
) -> StepBinding:
    """The act step of an item whose tool the plan chose: only that tool, its first free text
    argument the item's target, any other the other quoted words of its clause. When that
    leaves the model no choice, the harness makes the call itself. A tool that acts on one
    listed task first gets the list (its lookup tool, called by the harness), and its target is
    the id of the task the user's words name without doubt (``agent.prompting.compact_lookup``);
    when they name none, the harness asks which (``can_ask``: ``ask_user`` is bound) or says
    plainly that nothing was changed. ``todo_id`` is the item in progress (None: a one-step
    request done without a plan), which such an outcome closes as cancelled."""
    definition = compact_tool(tool)
    parameters = definition["function"]["parameters"]
    quotes = planned.clause_quotes
    others = [phrase for phrase in quotes if phrase != planned.target]
    target = planned.target
    lister = lookup_tool(tool, tools)
    if lister is not None:
        listed = looked_up(history)
        if listed is None:
            reply = lookup_call(lister)
            return StepBinding("act", [], lister.name, ACTION_MAX_TOKENS, reply=reply)
        chosen = _chosen_task(
            target, listed, target in quotes, history, todo_id, can_ask, prompts=prompts
        )
        if isinstance(chosen, StepBinding):
            return chosen
        target = task_reference(chosen)
    if others:
        # The clause quotes a second phrase ("rename 'a' to 'b'"): the first optional free
        # text argument (a new title) takes it; the compact schema drops optional ones.
        full = convert_to_openai_tool(tool)["function"].get("parameters", {})
        optional = [
            name
            for name, schema in full.get("properties", {}).items()
            if name not in parameters.get("properties", {}) and _is_free_string(schema)
        ]
        if optional:
            parameters.setdefault("properties", {})[optional[0]] = {"type": "string"}
            parameters.setdefault("required", []).append(optional[0])
    first = True
    fixed: dict[str, Any] = {}
    choice = False
    for name, schema in parameters.get("properties", {}).items():
        if _is_free_string(schema):
            options = [target] if first or not others else others
            first = False
            parameters["properties"][name] = {"enum": options}
            schema = parameters["properties"][name]
        values = schema.get("enum") or ([schema["const"]] if "const" in schema else None)
        if values is not None and len(values) == 1:
            fixed[name] = values[0]
        else:
            choice = True
    if not choice:
        return StepBinding(
            "act", [], tool.name, ACTION_MAX_TOKENS, reply=_tool_call_message(tool.name, fixed)
        )
    return StepBinding("act", [definition], tool.name, ACTION_MAX_TOKENS)


ASK_CALL_PREFIX = "call_which_"
"""The start of the tool-call id of the harness's question which task the user means."""


def _asked_answer(history: Sequence[AnyMessage]) -> str | None:
    """The user's answer to the harness's question for the current item (after its lookup),
    or None when none was asked yet."""
    for message in reversed(history):
        if isinstance(message, HumanMessage):
            return None
        if isinstance(message, ToolMessage):
            if message.name == ASK_USER:
                return message.text
            if message.name in TODO_TOOL_NAMES or is_lookup(message):
                return None
    return None


def _picked(answer: str, candidates: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The candidate the user's answer picks: its title (the options are the titles), the
    words of one title, or its number in the list; None for anything else."""
    text = answer.strip().strip("'\"").strip()
    if text.isdigit() and 1 <= int(text) <= len(candidates):
        return candidates[int(text) - 1]
    return matching_task(text, candidates, quoted=False)


def _chosen_task(
    target: str,
    listed: Sequence[Mapping[str, Any]],
    quoted: bool,
    history: Sequence[AnyMessage],
    todo_id: str | None,
    can_ask: bool,
    prompts: Prompts | None = None,
) -> Mapping[str, Any] | StepBinding:
    """The listed task the item acts on, or the step that asks the user which one, or the
    step that says nothing was changed. A word that points back ("it") is never searched for
    among the titles: if the plan could not say what it means, the user is asked."""
    pointing = refers_back(target)
    task = None if pointing else matching_task(target, listed, quoted=quoted)
    if task is not None:
        return task
    candidates = (
        list(listed[:MAX_QUESTION_OPTIONS]) if pointing else candidate_tasks(target, listed)
    )
    answer = _asked_answer(history)
    if answer is not None:
        picked = _picked(answer, candidates)
        if picked is not None:
            return picked
    if not candidates:
        return _not_done(
            texts_of(prompts).render("no_such_task", words=target), todo_id, prompts=prompts
        )
    if answer is None and can_ask:
        titles = [str(task["title"])[:MAX_OPTION_LENGTH] for task in candidates]
        question = texts_of(prompts).render("which_task", words=target).strip()
        call_id = f"{ASK_CALL_PREFIX}{uuid.uuid4().hex[:20]}"
        reply = AIMessage(
            content="",
            tool_calls=[
                {
                    "name": ASK_USER,
                    "args": {"question": question, "options": titles},
                    "id": call_id,
                }
            ],
        )
        return StepBinding("act", [], ASK_USER, ACTION_MAX_TOKENS, reply=reply)
    named = ", ".join(f"'{task['title']}'" for task in candidates)
    return _not_done(
        texts_of(prompts).render("task_not_chosen", words=target, candidates=named),
        todo_id,
        prompts=prompts,
    )


def _not_done(outcome: str, todo_id: str | None, prompts: Prompts | None = None) -> StepBinding:
    """The step that ends an action the harness would not make: the item cancelled with the
    reason, or, for a request done without a plan, the answer saying it."""
    outcome = outcome.strip()
    if todo_id is not None:
        args = {"todoId": todo_id, "outcome": outcome, "status": "cancelled"}
        reply = _tool_call_message("complete_todo", args)
        return StepBinding("close", [], "complete_todo", ACTION_MAX_TOKENS, reply=reply)
    answer = not_done_answer(texts_of(prompts).render("direct_failed", outcome=outcome))
    return StepBinding("answer", [], None, ANSWER_MAX_TOKENS, reply=answer)


CONFIRM_CALL_PREFIX = "call_confirm_"
"""The start of the tool-call id of the harness's question whether to make a stored action."""
YES = re.compile(r"^(?:y|yes|yeah|yep|ok|okay|sure|go ahead|do it|please do|1)\b", re.IGNORECASE)


def _from_request(planned: PlannedAction, said: Sequence[str]) -> bool:
    """Whether the user's own words (this turn's request, or the previous one that a pointing
    word of this turn reached back to) hold what the action acts on or the words it was
    planned from."""
    texts = [" ".join(text.split()).casefold() for text in said]
    return any(
        part and part in text
        for part in (" ".join(planned.target.split()).casefold(), planned.clause.casefold())
        for text in texts
    )


def _unconfirmed(
    tool: BaseTool,
    current: TurnTodo,
    planned: PlannedAction,
    history: Sequence[AnyMessage],
    request: str,
    prompts: Prompts | None = None,
) -> StepBinding | None:
    """The step that asks the user before an action that cannot be taken back when the words
    it was planned from are not this turn's (a row continued from an earlier turn, or written
    by anyone but this request's plan): stored text is never an order. None when the action
    may go on: it can be taken back (adding, listing), it comes from this request, or the user
    said yes; a "no" (or no way to ask) closes the item, nothing changed."""
    if not tool_entry(tool).lookup:
        return None  # it acts on no existing task: what it does can be taken back
    requests = [m.text for m in history if isinstance(m, HumanMessage) and not m.name]
    if _from_request(planned, [request, *requests[-2:-1]]):
        return None
    action = f"{planned.tool} on '{planned.target}'"
    answer = next(
        (
            message.text
            for message in reversed(_since_human(history))
            if isinstance(message, ToolMessage)
            and message.tool_call_id.startswith(CONFIRM_CALL_PREFIX)
        ),
        None,
    )
    if answer is not None and YES.match(answer.strip()):
        return None
    if answer is None:
        question = texts_of(prompts).render(
            "confirm_stored_action", title=current.title, action=action
        )
        call = {
            "name": ASK_USER,
            "args": {"question": question.strip(), "options": ["yes", "no"]},
            "id": f"{CONFIRM_CALL_PREFIX}{uuid.uuid4().hex[:20]}",
        }
        reply = AIMessage(content="", tool_calls=[call])
        return StepBinding("act", [], ASK_USER, ACTION_MAX_TOKENS, reply=reply)
    return _not_done(f"not confirmed ({action}); nothing was changed", current.id, prompts=prompts)


def _since_human(history: Sequence[AnyMessage]) -> list[AnyMessage]:
    """The messages after the newest user message (the turn's own work)."""
    for index in range(len(history) - 1, -1, -1):
        if isinstance(history[index], HumanMessage):
            return list(history[index + 1 :])
    return list(history)


def _is_free_string(schema: Mapping[str, Any]) -> bool:
    return schema.get("type") == "string" and "enum" not in schema and "const" not in schema


def _plan_binding(
    steps: Sequence[RequestStep],
    tools: Sequence[BaseTool],
    required: bool,
    history: Sequence[AnyMessage] = (),
    *,
    can_ask: bool = False,
    prompts: Prompts | None = None,
    request: str = "",
) -> StepBinding:
    """The plan step: the tools the steps' verbs name, and the model's choice for the rest;
    when every step is decided, the plan is made without a model call. ``request`` is the
    user's message as written (``steps`` may come from its English reading)."""
    decided = steps_by_verb(steps, tools)
    doubt = doubtful_step(steps, decided, tools)
    if doubt is not None:
        reply = not_done_answer(texts_of(prompts).render("compact_in_doubt", words=doubt.words))
        return StepBinding("answer", [], None, ANSWER_MAX_TOKENS, reply=reply)
    undecided = []
    for step in steps:
        if step.words in decided:
            continue
        if step_candidates(tools):
            undecided.append(step)
        else:
            # No verb names a tool for it, and every tool says which verbs it answers to: it
            # is not an action. (Asked, the small models named a tool for "Thanks for the
            # help", "I washed the car", "Email my boss ...": 1 right in 5, measured.)
            decided[step.words] = NOT_AN_ACTION
    if undecided:
        # The model chooses among the actions only: a continuation is named by its verbs.
        choices = [tool for tool in tools if tool.name != CONTINUE_OPEN_TODOS]
        return StepBinding(
            "plan",
            [plan_steps_tool(undecided, choices)],
            PLAN_TOOL,
            PLAN_MAX_TOKENS,
            plan_steps=tuple(steps),
            plan_decided=decided,
            plan_required=required,
            plan_tools=tuple(tools),
            plan_history=tuple(history),
            plan_can_ask=can_ask,
        )
    items = plan_items(steps, decided, tools, previous_turn_tasks(history, tools))
    if continues(steps, decided):
        reply = continuation_message(items)
        return StepBinding("plan", [], CONTINUE_OPEN_TODOS, PLAN_MAX_TOKENS, reply=reply)
    by_name = {tool.name: tool for tool in tools}
    if len(items) == 1 and not required:
        # One step needs no plan (planning "auto"): the harness does it and answers from it.
        action = stored_action(items[0]["context"])
        if action is not None and action.tool in by_name and not agent_type(by_name[action.tool]):
            return _planned_action_binding(
                by_name[action.tool], action, tools, history, can_ask=can_ask, prompts=prompts
            )
    if items or required:
        return StepBinding(
            "plan",
            [],
            "create_todo",
            PLAN_MAX_TOKENS,
            reply=_tool_call_message("create_todo", {"items": items or whole_request_items(steps)}),
        )
    # Nothing the request asks for is something a tool does: said plainly, no call made.
    if any(verb_at_start(step.words, CONTINUE_VERBS) for step in steps):
        # "please continue" with no plan left open (else ``continue_open_todos`` was bound).
        return StepBinding(
            "answer",
            [],
            None,
            ANSWER_MAX_TOKENS,
            reply=AIMessage(texts_of(prompts).load("nothing_to_continue")),
        )
    return _no_action_answer(steps, tools, request, prompts)


def _no_action_answer(
    steps: Sequence[RequestStep],
    tools: Sequence[BaseTool],
    request: str = "",
    prompts: Prompts | None = None,
) -> StepBinding:
    """The answer to a request none of whose steps is an action: a question or small talk is
    the model's to answer in its own words (no tools); a request that only took something back
    ("forget it", "never mind", "add milk. No, don't.") changed nothing and says so; a request
    in another language that no rule read says it was not understood
    (``agent.prompting.compact_languages``); anything else no tool does is said plainly."""
    if any(retraction(step.words) is not None or negated(step.words) is not None for step in steps):
        reply = AIMessage(content=texts_of(prompts).load("nothing_changed"))
        return StepBinding("answer", [], None, ANSWER_MAX_TOKENS, reply=reply)
    said = request or " ".join(step.clause for step in steps)
    computed = arithmetic_answer(said)
    if computed is not None:  # the small model got sums wrong (measured): computed here
        return StepBinding("answer", [], None, ANSWER_MAX_TOKENS, reply=AIMessage(computed))
    if is_conversation(said):
        return StepBinding("answer", [], None, ANSWER_MAX_TOKENS)
    if looks_foreign(said):
        words = " ".join(said.split()).strip(" .!?")[:MAX_STRING_LENGTH]
        reply = not_done_answer(texts_of(prompts).render("compact_not_understood", words=words))
        return StepBinding("answer", [], None, ANSWER_MAX_TOKENS, reply=reply)
    names = ", ".join(tool.name for tool in tools)
    reply = not_done_answer(texts_of(prompts).render("nothing_to_do", tools=names))
    return StepBinding("answer", [], None, ANSWER_MAX_TOKENS, reply=reply)


def previous_turn_tasks(history: Sequence[AnyMessage], tools: Sequence[BaseTool]) -> list[str]:
    """The tasks the thread's previous request named (``named_tasks``): what "it" or "both"
    may mean in this one when this one names nothing before them. Only the user's own words
    count, never task titles, tool results or answers."""
    requests = [
        message
        for message in history
        if isinstance(message, HumanMessage) and not message.name and message.text.strip()
    ]
    if len(requests) < 2:
        return []
    return named_tasks(request_steps(in_english(requests[-2].text)), tools)


def continues(steps: Sequence[RequestStep], decided: Mapping[str, Any]) -> bool:
    """Whether a step of the request asks to go on with the plan earlier turns left open (its
    verb named ``continue_open_todos``, bound only when such rows exist)."""
    return any(decided.get(step.words) == CONTINUE_OPEN_TODOS for step in steps)


def continuation_message(items: Sequence[Mapping[str, Any]]) -> AIMessage:
    """The plan of a request that continues: the open rows copied first, then the request's
    other steps added after them, as the full profile's model would call both."""
    calls = _tool_call_message(CONTINUE_OPEN_TODOS, {}).tool_calls
    if items:
        calls += _tool_call_message("create_todo", {"items": list(items)}).tool_calls
    return AIMessage(content="", tool_calls=calls)


def worker_step(
    tools: Sequence[BaseTool], history: Sequence[AnyMessage], prompts: Prompts | None = None
) -> AIMessage | None:
    """A compact worker's next message without its model, or None to ask the model.

    The item handed over carries the plan's action in its context (``PlannedAction``):
    the worker makes that call as the supervisor would (its lookup first, for an action on an
    existing task), then answers with what it returned. Why: the worker's own loop leaves the
    small model a free choice of tools and words, which it did not use (measured: the 270M
    model answered without calling a tool)."""
    hand_over = next((m for m in reversed(history) if isinstance(m, HumanMessage)), None)
    if hand_over is None:
        return None
    by_name = {tool.name: tool for tool in tools}
    action = next(
        (
            found
            for line in hand_over.text.splitlines()
            if (found := _line_action(line)) is not None and found.tool in by_name
        ),
        None,
    )
    if action is None:
        return None
    if _since_last_todo_result(history):
        return AIMessage(content=direct_answer(history, prompts=prompts))
    return _planned_action_binding(
        by_name[action.tool], action, tools, history, prompts=prompts
    ).reply


def _line_action(line: str) -> PlannedAction | None:
    """The action on the hand-over's ``Context:`` line (``prompts/worker_request.md``): only
    there, never in the user's request quoted below it."""
    return stored_action(line.split(":", 1)[1]) if line.startswith("Context:") else None


def grounded_phrases(current: TurnTodo, request: str) -> list[str]:
    """What a free-text argument of the item's action may be: the item's title, and the quoted
    phrases of its title, its context (a planned action's clause), or the request that share a
    word with the title."""
    title_words = set(_words(current.title))
    phrases = [current.title.strip()]
    planned = planned_action(current)
    context = planned.clause if planned is not None else current.context or ""
    for text in (current.title, context, request):
        for match in QUOTED.finditer(text):
            phrase = next(group for group in match.groups() if group).strip()
            if phrase and (text is not request or title_words & set(_words(phrase))):
                phrases.append(phrase)
    unique = list(dict.fromkeys(phrase[:MAX_STRING_LENGTH] for phrase in phrases if phrase))
    # The most specific phrase first: a quoted name beats the step's whole title.
    return sorted(unique, key=lambda phrase: phrase == current.title.strip())


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def ground_strings(tool: dict[str, Any], phrases: Sequence[str]) -> dict[str, Any]:
    """``tool`` with every free string argument limited to ``phrases``."""

    def ground(schema: Any) -> Any:
        if not isinstance(schema, dict):
            return schema
        if schema.get("type") == "string" and "enum" not in schema and "const" not in schema:
            return {"enum": list(phrases)}
        return {key: _ground_value(key, value, ground) for key, value in schema.items()}

    function = tool["function"]
    return {**tool, "function": {**function, "parameters": ground(function["parameters"])}}


def _ground_value(key: str, value: Any, ground: Any) -> Any:
    if key == "properties" and isinstance(value, dict):
        return {name: ground(prop) for name, prop in value.items()}
    if key in ("items",):
        return ground(value)
    if key == "anyOf" and isinstance(value, list):
        return [ground(option) for option in value]
    return value


def dispatch_tool(tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One function whose arguments are ``{"name": <a tool>, "arguments": <its arguments>}``."""
    variants = [
        {
            "type": "object",
            "properties": {
                "name": {"const": tool["function"]["name"]},
                "arguments": tool["function"]["parameters"],
            },
            "required": ["name", "arguments"],
        }
        for tool in tools
    ]
    listing = "; ".join(
        f"{tool['function']['name']}: {tool['function']['description']}" for tool in tools
    )
    return {
        "type": "function",
        "function": {
            "name": DISPATCH_TOOL,
            "description": f"Call one tool. {listing}",
            "parameters": {"anyOf": variants},
        },
    }


def unwrap_dispatch(message: Any) -> Any:
    """The ``use_tool`` call as the real tool call it names (other messages pass unchanged)."""
    if not isinstance(message, AIMessage) or not message.tool_calls:
        return message
    calls = []
    for call in message.tool_calls:
        args = call["args"]
        if call["name"] == DISPATCH_TOOL and isinstance(args.get("name"), str):
            arguments = args.get("arguments")
            call = {
                **call,
                "name": args["name"],
                "args": arguments if isinstance(arguments, dict) else {},
            }
        calls.append(call)
    kwargs = {
        k: v
        for k, v in message.additional_kwargs.items()
        if k not in ("tool_calls", "function_call")
    }
    return message.model_copy(update={"tool_calls": calls, "additional_kwargs": kwargs})


def bind_step(
    model: BaseChatModel,
    binding: StepBinding,
    rows: Sequence[TurnTodo] = (),
    prompts: Prompts | None = None,
) -> Any:
    """``model`` bound to the step's tools, tool choice, temperature and token cap, or the
    harness's own reply when the step needs no model.

    The answer after a finished plan is built from the rows, not generated: asked to sum up,
    the 270M model echoed its prompt or imitated the tool-call history (measured), and the rows
    already say what was done, with each outcome (a list step's outcome holds what it listed).
    """
    if binding.phase == "answer" and rows:
        answer = AIMessage(content=plan_finished_message(rows, prompts))
        return RunnableLambda(lambda _prompt: answer)
    if binding.reply is not None:
        reply = binding.reply
        return RunnableLambda(lambda _prompt: reply)
    if not binding.tools:
        free = model.bind(temperature=TEMPERATURE, max_tokens=binding.max_tokens)
        return _conversation(free, prompts=prompts) if binding.phase == "answer" else free
    bound = model.bind_tools(
        binding.tools,
        tool_choice=binding.tool_choice,
        temperature=TEMPERATURE,
        max_tokens=binding.max_tokens,
    )
    if binding.plan_steps:
        return _plan_runnable(model, bound, binding, binding.plan_tools, prompts=prompts)
    if binding.tool_choice == DISPATCH_TOOL:
        return bound | RunnableLambda(unwrap_dispatch)
    return bound


def conversation_prompt(prompt: Any, prompts: Prompts | None = None) -> list[AnyMessage]:
    """The prompt of a question or small talk no tool does: the conversation's own short
    system prompt (``prompts/compact_conversation.md``), a few example exchanges
    (``prompts/compact_conversation_examples.md``) and the user's last message, without the
    planning instructions, which a small model answered by echoing the request. Why the
    examples: the embedded model is a base model, which without them repeated the question
    ("What's the capital of France?") and with them answered it ("Paris"; measured)."""
    messages = prompt.to_messages() if hasattr(prompt, "to_messages") else list(prompt)
    said = [message for message in messages if isinstance(message, HumanMessage)]
    shown: list[AnyMessage] = []
    for question, answer in conversation_examples(prompts):
        shown += [HumanMessage(content=question), AIMessage(content=answer)]
    return [
        SystemMessage(content=texts_of(prompts).load("compact_conversation")),
        *shown,
        *said[-1:],
    ]


def conversation_examples(prompts: Prompts | None = None) -> list[tuple[str, str]]:
    """The example exchanges: blocks of two lines (a message, its answer) apart by a blank
    line."""
    blocks = texts_of(prompts).load("compact_conversation_examples").strip().split("\n\n")
    pairs = [block.strip().split("\n", 1) for block in blocks if block.strip()]
    return [(pair[0].strip(), pair[1].strip()) for pair in pairs if len(pair) == 2]


def _no_answer(reply: str, question: str, prompts: Prompts | None = None) -> bool:
    """Whether the model's ``reply`` says nothing of its own: empty, the question repeated or
    another question, the system prompt or the examples' words copied, or nothing the question
    did not say (what the embedded model did when it had no answer; measured)."""

    def plain(text: str) -> str:
        return " ".join(text.split()).casefold().strip(" ?!.")

    spoken, said = plain(reply), plain(question)
    if not spoken or (said and (said in spoken or spoken in said)) or reply.strip().endswith("?"):
        return True  # nothing, the question repeated, or another question instead of an answer
    if plain(texts_of(prompts).load("compact_conversation"))[:40] in spoken:
        return True
    # Nothing the question did not say ("France is the capital of France"), or words that
    # come from the examples and not from the question ("... at the University of Rome").
    new = content_stems(reply) - content_stems(question)
    examples = " ".join(" ".join(pair) for pair in conversation_examples(prompts))
    return not new or bool(new & content_stems(examples))


def _conversation(free: Any, prompts: Prompts | None = None) -> Any:
    """The model's own answer to a question or small talk, with its short prompt; a reply that
    only repeats the user's words or says nothing is no answer (the embedded 270M model, asked
    "What is 12 times 12?", repeated the question: measured), so the user is told plainly that
    there is no answer and nothing changed."""

    async def answer(prompt: Any) -> AIMessage:
        messages = conversation_prompt(prompt, prompts=prompts)
        # Greedy: sampled, the same question got "Paris" once and "France" the next time.
        reply = await free.ainvoke(messages, temperature=0.0)
        text = reply.text if isinstance(reply, AIMessage) else str(reply)
        if _no_answer(text, messages[-1].text if messages else "", prompts):
            return not_done_answer(texts_of(prompts).load("conversation_unanswered"))
        return reply if isinstance(reply, AIMessage) else AIMessage(content=text)

    return RunnableLambda(answer)


def _plan_runnable(
    model: BaseChatModel,
    bound: Any,
    binding: StepBinding,
    tools: Sequence[BaseTool],
    prompts: Prompts | None = None,
) -> Any:
    """The plan call: the model's classification of the request's steps, as ``create_todo``.

    When it finds nothing to do, a turn that must plan gets one item for the whole request
    (worked with every tool, as before this plan existed), and any other turn an answer in the
    model's own words, from a second call without tools (a greeting, a question about tools).
    """
    steps = binding.plan_steps

    async def plan(prompt: Any) -> AIMessage:
        reply = await bound.ainvoke(prompt)
        message = reply if isinstance(reply, AIMessage) else AIMessage(content="")
        calls = message.tool_calls
        chosen = next((call["args"] for call in calls if call["name"] == PLAN_TOOL), {})
        decided = {**chosen, **binding.plan_decided}
        items = plan_items(steps, decided, tools, previous_turn_tasks(binding.plan_history, tools))
        if continues(steps, decided):
            return continuation_message(items)
        if not items and binding.plan_required:
            items = whole_request_items(steps)
        direct = (
            _direct_action(
                items, tools, binding.plan_history, can_ask=binding.plan_can_ask, prompts=prompts
            )
            if not binding.plan_required
            else None
        )
        if direct is not None:
            return direct
        if items:
            call_id = calls[0]["id"] if calls and calls[0].get("id") else None
            planned = _tool_call_message("create_todo", {"items": items})
            if call_id:
                planned.tool_calls[0]["id"] = call_id
            return message.model_copy(
                update={
                    "content": "",
                    "tool_calls": planned.tool_calls,
                    "additional_kwargs": {},
                    "invalid_tool_calls": [],
                }
            )
        free = model.bind(temperature=TEMPERATURE, max_tokens=ANSWER_MAX_TOKENS)
        answer = await free.ainvoke(prompt)
        return answer if isinstance(answer, AIMessage) else AIMessage(content=str(answer))

    return RunnableLambda(plan)


FINISH_TOOL = "answer"
"""The no-plan loop's way to finish: a ``use_tool`` variant whose text becomes the answer."""
FINISH_MAX_LENGTH = 400


def no_plan_binding(
    tools: Sequence[BaseTool], history: Sequence[AnyMessage], request: str
) -> StepBinding:
    """The step of a compact turn under ``planning="off"``: no plan, no rows, so every call is
    a forced ``use_tool`` over the domain tools plus ``answer`` (the way to finish).

    Kept apart from ``step_binding`` (the planned loop) so the two can change independently.
    Free-text arguments are held to the request's quoted phrases when it quotes any (the
    grounding of the planned act step, without a plan item to read); otherwise they are free,
    capped as in every compact schema. ``history`` is part of the signature for the same
    reason as ``step_binding``'s: what the step offers may come to depend on what already ran.
    """
    del history  # every no-plan step offers the same tools
    phrases = [
        next(group for group in match.groups() if group).strip()
        for match in QUOTED.finditer(request)
    ]
    phrases = list(dict.fromkeys(phrase for phrase in phrases if phrase))
    domain = [
        ground_strings(compact_tool(tool), phrases) if phrases else compact_tool(tool)
        for tool in tools
        if tool.name not in TODO_TOOL_NAMES and tool.name not in (ASK_USER, "delegate")
    ]
    finish = {
        "type": "function",
        "function": {
            "name": FINISH_TOOL,
            "description": "Reply to the user and end the turn.",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string", "maxLength": FINISH_MAX_LENGTH}},
                "required": ["text"],
            },
        },
    }
    return StepBinding("act", [dispatch_tool([*domain, finish])], DISPATCH_TOOL, ACTION_MAX_TOKENS)


def unwrap_no_plan(message: Any) -> Any:
    """``unwrap_dispatch``, with a call of ``answer`` turned into the plain reply it carries."""
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            args = call["args"]
            if call["name"] == DISPATCH_TOOL and args.get("name") == FINISH_TOOL:
                arguments = args.get("arguments")
                text = arguments.get("text") if isinstance(arguments, dict) else None
                return AIMessage(content=str(text or "").strip(), id=message.id)
    return unwrap_dispatch(message)


def bind_no_plan(model: BaseChatModel, binding: StepBinding) -> Any:
    """``model`` bound to a ``no_plan_binding`` step, its dispatch call unwrapped."""
    bound = model.bind_tools(
        binding.tools,
        tool_choice=binding.tool_choice,
        temperature=TEMPERATURE,
        max_tokens=binding.max_tokens,
    )
    return bound | RunnableLambda(unwrap_no_plan)
