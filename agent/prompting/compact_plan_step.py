"""The plan step of the compact profile: the binding of the call that plans a request, and
the runnable that turns the model's choice into ``create_todo``.

Why: the plan is made from the user's own words (``agent.prompting.compact_plan``), each
step getting the tool its verb names, and the model is asked only about the steps no verb
decides. When every step is decided no model call is made: a lone step under planning
``auto`` is done at once (``agent.prompting.compact_act``), a continuation copies the open
rows, and a request no tool does is answered plainly (a retraction, a sum, a question for the
model's own words, another language, or what the tools can do).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool

from agent.prompting.compact_act import direct_action, planned_action_binding
from agent.prompting.compact_arithmetic import arithmetic_answer
from agent.prompting.compact_binding import (
    ANSWER_MAX_TOKENS,
    PLAN_MAX_TOKENS,
    TEMPERATURE,
    StepBinding,
    tool_call_message,
)
from agent.prompting.compact_languages import in_english, looks_foreign
from agent.prompting.compact_plan import (
    NOT_AN_ACTION,
    PLAN_TOOL,
    agent_type,
    deferred_step,
    doubtful_step,
    named_tasks,
    plan_items,
    plan_steps_tool,
    step_candidates,
    steps_by_verb,
    stored_action,
    whole_request_items,
)
from agent.prompting.compact_schemas import MAX_STRING_LENGTH
from agent.prompting.compact_verbs import CONTINUE_VERBS, tool_entry
from agent.prompting.request_steps import (
    MAX_STEPS,
    RequestStep,
    asks_about_my_tasks,
    is_conversation,
    negated,
    request_steps,
    retraction,
    verb_at_start,
)
from agent.tool_names import CONTINUE_OPEN_TODOS
from agent.turn.outcome import not_done_answer
from prompts import Prompts
from prompts import chosen as texts_of


def plan_binding(
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
    if asks_about_my_tasks(request or " ".join(step.words for step in steps)):
        decided = listing_answers(steps, decided, tools)
    refused = _not_now(steps, decided, tools, prompts)
    if refused is not None:
        return refused
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
            return planned_action_binding(
                by_name[action.tool], action, tools, history, can_ask=can_ask, prompts=prompts
            )
    if items or required:
        return StepBinding(
            "plan",
            [],
            "create_todo",
            PLAN_MAX_TOKENS,
            reply=tool_call_message("create_todo", {"items": items or whole_request_items(steps)}),
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


def _not_now(
    steps: Sequence[RequestStep],
    decided: Mapping[str, str],
    tools: Sequence[BaseTool],
    prompts: Prompts | None,
) -> StepBinding | None:
    """The answer of a request that changes nothing because it has more than ``MAX_STEPS``
    steps (doing its first ones and dropping the rest would answer a request the user did not
    send), corrects or hedges itself in words no rule reads (``doubtful_step``), or asks for a
    change later or on a condition (``deferred_step``); None for any other."""
    doubt = doubtful_step(steps, decided, tools)
    if sum(1 for step in steps if not step.heading) > MAX_STEPS:
        text = texts_of(prompts).render("compact_too_long", steps=str(MAX_STEPS))
    elif doubt is not None:
        text = texts_of(prompts).render("compact_in_doubt", words=doubt.words)
    elif (later := deferred_step(steps, decided, tools)) is not None:
        text = texts_of(prompts).render("compact_deferred", words=later[0].words, when=later[1])
    else:
        return None
    return StepBinding("answer", [], None, ANSWER_MAX_TOKENS, reply=not_done_answer(text))


def listing_answers(
    steps: Sequence[RequestStep], decided: Mapping[str, str], tools: Sequence[BaseTool]
) -> dict[str, str]:
    """A question about the user's own tasks answered by the listing (``asks_about_my_tasks``):
    its first step lists, the rest is no action; as decided when a step changes something, or
    no tool only reads."""
    lister = next((tool.name for tool in tools if tool_entry(tool).reads), None)
    entries = {tool.name: tool_entry(tool) for tool in tools}
    changes = any(
        tool not in (None, NOT_AN_ACTION) and not entries[tool].reads for tool in decided.values()
    )
    if lister is None or changes or not steps:
        return dict(decided)
    return {step.words: lister if index == 0 else NOT_AN_ACTION for index, step in enumerate(steps)}


def _no_action_answer(
    steps: Sequence[RequestStep],
    tools: Sequence[BaseTool],
    request: str = "",
    prompts: Prompts | None = None,
) -> StepBinding:
    """The answer to a request none of whose steps is an action: a question or small talk is
    the model's to answer in its own words (no tools); a request that only took something back
    ("forget it", "never mind", "add milk. No, don't.") changed nothing and says so, unless it
    names something after the take-back that no rule reads ("Not that, I said 'buy grapes'": a
    correction, in doubt); a request in another language that no rule read says it was not
    understood (``agent.prompting.compact_languages``); anything else no tool does is said
    plainly."""
    taken_back = [
        step
        for step in steps
        if retraction(step.words) is not None or negated(step.words) is not None
    ]
    if taken_back:
        # A quoted title after the take-back is what it was to be replaced with.
        after = steps[steps.index(taken_back[0]) + 1 :]
        named = next((step for step in after if step.quoted and step not in taken_back), None)
        if named is not None:
            text = texts_of(prompts).render("compact_in_doubt", words=named.words)
            reply = not_done_answer(text)
        else:
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
    calls = tool_call_message(CONTINUE_OPEN_TODOS, {}).tool_calls
    if items:
        calls += tool_call_message("create_todo", {"items": list(items)}).tool_calls
    return AIMessage(content="", tool_calls=calls)


def plan_runnable(
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
            direct_action(
                items, tools, binding.plan_history, can_ask=binding.plan_can_ask, prompts=prompts
            )
            if not binding.plan_required
            else None
        )
        if direct is not None:
            return direct
        if items:
            call_id = calls[0]["id"] if calls and calls[0].get("id") else None
            planned = tool_call_message("create_todo", {"items": items})
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
