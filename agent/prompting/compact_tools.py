"""The compact profile's tools: what one LLM call may call when the model is a small local one.

The profile itself (its system prompt, plan view and history, as data) is
``agent.prompting.builder.COMPACT``; this module decides what each call is for (its phase)
and binds that step's tools, through the modules that build each kind of step:

- ``compact_plan_step``: the plan call (``compact_plan`` makes the rows from the request);
- ``compact_act``: the act step of the item in progress, or of a lone step done without a plan;
- ``compact_questions``: which task the user means, or whether to make a stored action;
- ``compact_outcomes``: what the item's actions came to (its close, and a direct answer);
- ``compact_conversation``: the model's own answer to a question or small talk;
- ``compact_schemas``: the shortened, grounded schemas and the one ``use_tool`` function;
- ``compact_binding``: the ``StepBinding`` every step is described by;
- ``compact_no_plan`` (a turn under ``planning="off"``) and ``compact_worker`` (a worker's
  step), which the graph calls directly.

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

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool

from agent.prompting.compact_act import act_binding
from agent.prompting.compact_binding import (
    ACTION_MAX_TOKENS,
    ANSWER_MAX_TOKENS,
    PLAN_MAX_TOKENS,
    TEMPERATURE,
    Phase,
    StepBinding,
    tool_call_message,
)
from agent.prompting.compact_conversation import conversation_runnable
from agent.prompting.compact_languages import in_english
from agent.prompting.compact_outcomes import (
    action_outcomes,
    action_succeeded,
    direct_reply,
    failure_outcome,
    since_last_todo_result,
)
from agent.prompting.compact_plan import planned_action, planning_tools
from agent.prompting.compact_plan_step import plan_binding, plan_runnable
from agent.prompting.compact_schemas import DISPATCH_TOOL, compact_tool, unwrap_dispatch
from agent.prompting.request_steps import request_steps
from agent.tool_names import ASK_USER, CONTINUE_OPEN_TODOS, TODO_TOOL_NAMES
from agent.turn.outcome import not_done_answer, plan_finished_message
from prompts import Prompts, chosen
from storage.models import TurnTodo

ACTION_ATTEMPTS = 2
"""Failed actions on one item before the model must close it (completed or cancelled)."""


def step_phase(
    rows: Sequence[TurnTodo],
    history: Sequence[AnyMessage],
    required_tool: str | None,
    prompts: Prompts | None = None,
) -> Phase:
    """What this call is for, from the plan rows and the history (pure, so it is testable)."""
    if required_tool is None and not rows and since_last_todo_result(history):
        return "answer"  # a one-step request was done directly, without a plan
    if required_tool is not None or not rows:
        return "plan"
    current = next((row for row in rows if row.status == "in_progress"), None)
    if current is None:
        return "answer"
    results = since_last_todo_result(history)
    attempts = 1 if planned_action(current) is not None else ACTION_ATTEMPTS
    if action_succeeded(history, prompts=prompts) or len(results) >= attempts:
        return "close"
    return "act"


def no_words_answer(prompts: Prompts | None = None) -> StepBinding:
    """The answer to a request with no word at all ("…", emoji): offered the tools with nothing
    to read them from, the small model wrote tasks of its own (titles such as "add_task",
    measured), so nothing is done and the answer asks for words."""
    reply = not_done_answer(chosen(prompts).load("compact_no_words"))
    return StepBinding("answer", [], None, ANSWER_MAX_TOKENS, reply=reply)


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
            return plan_binding(
                steps,
                planning_tools(domain_tools),
                required_tool == "create_todo",
                history,
                can_ask=ASK_USER in by_name,
                prompts=prompts,
                request=request,
            )
        if not any(character.isalnum() for character in request) and domain_tools:
            return no_words_answer(prompts)
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
        if action_succeeded(history, prompts=prompts):
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
            reply=tool_call_message("complete_todo", args),
        )
    return act_binding(current, by_name, domain_tools, history, request, prompts=prompts)


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
        return conversation_runnable(free, prompts=prompts) if binding.phase == "answer" else free
    bound = model.bind_tools(
        binding.tools,
        tool_choice=binding.tool_choice,
        temperature=TEMPERATURE,
        max_tokens=binding.max_tokens,
    )
    if binding.plan_steps:
        return plan_runnable(model, bound, binding, binding.plan_tools, prompts=prompts)
    if binding.tool_choice == DISPATCH_TOOL:
        return bound | RunnableLambda(unwrap_dispatch)
    return bound
