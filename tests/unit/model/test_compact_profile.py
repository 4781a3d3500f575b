"""The compact prompt profile for small local models: which tools each step offers, with what
schema, and what reaches the server. No model runs here; the real model's behaviour under this
profile is measured in docs/local_model_runs.md."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic import SecretStr

from agent.context import Context
from agent.llm.openai_compatible import CompatibleChatOpenAI
from agent.prompting.builder import COMPACT, model_messages, prompt_profile
from agent.prompting.compact_plan import stored_action
from agent.prompting.compact_schemas import DISPATCH_TOOL, unwrap_dispatch
from agent.prompting.compact_tools import step_binding
from agent.tools.ask_user import build_ask_user_tool
from agent.tools.continue_plan import build_continue_tool
from agent.tools.personal_tasks import build_task_tools
from agent.tools.todos import build_todo_tools
from storage import Database
from storage.models import TurnTodo
from tests.fakes import ScriptedChatModel

REQUEST = (
    "Plan my Saturday: add 'buy groceries' and 'do laundry' to my tasks, then show me the rest"
)


@pytest.fixture
def tools() -> list[Any]:
    database = Database("sqlite+aiosqlite:///:memory:")
    return [
        *build_todo_tools(database),
        build_ask_user_tool(database),
        *build_task_tools(database),
    ]


def row(title: str, status: str, *, id: str = "id-1", outcome: str | None = None) -> TurnTodo:
    return TurnTodo(id=id, title=title, status=status, outcome=outcome, priority=0)


def _planned_tool(context: str) -> str | None:
    """The tool of the action a plan item's ``context`` holds."""
    action = stored_action(context)
    return action.tool if action else None


def tool_result(name: str, *, error: bool = False, content: str = "{}") -> ToolMessage:
    return ToolMessage(
        content=content,
        tool_call_id=f"call-{name}",
        name=name,
        status="error" if error else "success",
    )


def variants(binding: Any) -> dict[str, dict[str, Any]]:
    """The dispatch tool's variants by tool name: {name: arguments schema}."""
    [tool] = binding.tools
    return {
        variant["properties"]["name"]["const"]: variant["properties"]["arguments"]
        for variant in tool["function"]["parameters"]["anyOf"]
    }


@pytest.mark.parametrize(
    ("setting", "choice", "expected"),
    [
        ("local", "auto", "compact"),
        ("local:qwen2.5-coder-1.5b", "auto", "compact"),
        ("openai:gpt-4o-mini", "auto", "full"),
        (None, "auto", "full"),  # a chat model instance: only an explicit choice counts
        ("openai:qwen2.5", "compact", "compact"),
        ("local", "full", "full"),
    ],
)
def test_the_embedded_model_gets_the_compact_profile_unless_told_otherwise(
    setting: str | None, choice: Any, expected: str
) -> None:
    assert prompt_profile(Context(prompt_profile=choice), setting).name == expected


def test_unknown_profile_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="'auto', 'full' or 'compact'"):
        Context(prompt_profile="tiny")  # type: ignore[arg-type]


def planned_row(tool: str, target: str, clause: str, *, status: str = "in_progress") -> TurnTodo:
    from agent.prompting.compact_plan import PlannedAction

    context = PlannedAction(tool, target, clause).as_context()
    return TurnTodo(id="id-1", title=target, status=status, priority=0, context=context)


def test_a_request_whose_verbs_name_every_step_is_planned_without_the_model(
    tools: list[Any],
) -> None:
    request = (
        "Plan my Saturday: add 'buy groceries' and 'do laundry' to my tasks, "
        "then show me what is left"
    )

    binding = step_binding(tools, [], [HumanMessage(request)], "create_todo", request)

    assert binding.reply is not None and binding.tools == []
    [call] = binding.reply.tool_calls
    items = call["args"]["items"]
    # The heading is no item, no item restates another, and "show me" is a list step.
    assert [item["title"] for item in items] == [
        "buy groceries",
        "do laundry",
        "show me what is left",
    ]
    assert [_planned_tool(item["context"]) for item in items] == [
        "add_task",
        "add_task",
        "list_tasks",
    ]


def book_table_tool() -> Any:
    from langchain_core.tools import tool

    @tool
    async def book_table(restaurant: str) -> str:
        """Book a table at a restaurant."""
        return restaurant

    return book_table


def test_steps_no_verb_names_are_not_actions_when_every_tool_declares_its_verbs(
    tools: list[Any],
) -> None:
    request = "I washed the car yesterday."

    binding = step_binding(tools, [], [HumanMessage(request)], None, request)

    assert binding.phase == "answer" and binding.reply is not None
    assert "no tool of mine does what you asked" in binding.reply.content
    assert "add_task" in binding.reply.content


def test_small_talk_no_verb_names_is_the_models_to_answer_with_no_tool(
    tools: list[Any],
) -> None:
    request = "Hi there! Thanks for the help yesterday."

    binding = step_binding(tools, [], [HumanMessage(request)], None, request)

    # Read as written: the greeting was once cut off as courtesy and answered "no tool of
    # mine does what you asked"; small talk is the model's (issue 40 section 2).
    assert binding.phase == "answer" and binding.reply is None and not binding.tools


def test_a_step_no_verb_names_is_offered_to_the_model_with_the_tools_that_declare_none(
    tools: list[Any],
) -> None:
    request = "Saturday is busy; a table at Luigi's, and show me everything"

    binding = step_binding([*tools, book_table_tool()], [], [HumanMessage(request)], None, request)

    [tool] = binding.tools
    properties = tool["function"]["parameters"]["properties"]
    assert binding.tool_choice == "plan_steps"
    assert list(properties) == ["Saturday is busy", "a table at Luigi's"]  # "show me" decided
    assert properties["a table at Luigi's"]["enum"] == ["book_table", "none"]


async def test_the_models_choices_and_the_verbs_make_one_create_todo_call(
    tools: list[Any],
) -> None:
    from agent.prompting.compact_tools import bind_step

    request = "Saturday is busy; a table at Luigi's, and show me everything"
    binding = step_binding([*tools, book_table_tool()], [], [HumanMessage(request)], None, request)
    choice = AIMessage(
        content="",
        tool_calls=[
            {
                "name": "plan_steps",
                "args": {"Saturday is busy": "none", "a table at Luigi's": "book_table"},
                "id": "call-plan",
            }
        ],
    )
    model = ScriptedChatModel(script=[choice])

    planned = await bind_step(model, binding).ainvoke([HumanMessage(request)])

    [call] = planned.tool_calls
    assert (call["name"], call["id"]) == ("create_todo", "call-plan")
    assert [item["title"] for item in call["args"]["items"]] == [
        "a table at Luigi's",
        "show me everything",
    ]


def test_a_planned_action_whose_words_fix_every_argument_is_made_without_the_model(
    tools: list[Any],
) -> None:
    rows = [planned_row("add_task", "buy groceries", "add 'buy groceries' to my tasks")]

    binding = step_binding(tools, rows, [tool_result("create_todo")], None, REQUEST)

    assert binding.reply is not None
    [call] = binding.reply.tool_calls
    assert (call["name"], call["args"]) == ("add_task", {"title": "buy groceries"})


def test_a_planned_list_offers_only_the_list_tool_with_its_filter_to_choose(
    tools: list[Any],
) -> None:
    rows = [planned_row("list_tasks", "what is left", "show me what is left")]

    binding = step_binding(tools, rows, [tool_result("create_todo")], None, REQUEST)

    [tool] = binding.tools
    assert binding.reply is None and binding.tool_choice == "list_tasks"
    assert tool["function"]["parameters"]["properties"]["filter"]["enum"] == [
        "all",
        "pending",
        "completed",
    ]


def test_an_item_just_started_offers_the_domain_tools_with_the_users_words(
    tools: list[Any],
) -> None:
    """A row the compact plan did not make (a full-profile plan, a user's edit) is worked
    with every domain tool, as before."""
    rows = [row("buy groceries", "in_progress"), row("do laundry", "pending", id="id-2")]

    binding = step_binding(tools, rows, [tool_result("create_todo")], None, REQUEST)
    offered = variants(binding)

    assert binding.tool_choice == DISPATCH_TOOL
    assert set(offered) == {  # no ask_user: an unattended small model must not pause the run
        "add_task",
        "list_tasks",
        "complete_task",
        "update_task",
        "delete_task",
        "complete_todo",
    }
    # A free title is limited to the item's own words and the request's matching quote.
    assert offered["add_task"]["properties"]["title"] == {"enum": ["buy groceries"]}
    assert offered["complete_todo"]["properties"]["todoId"] == {"const": "id-1"}
    assert "description" not in offered["add_task"]["properties"]  # optional free text dropped


def test_quoted_words_of_the_request_ground_an_item_that_names_them() -> None:
    from agent.prompting.compact_schemas import grounded_phrases

    current = row("Add 'call mom' to my tasks", "in_progress")

    phrases = grounded_phrases(current, "Please add 'call mom' and 'pay rent'")

    assert phrases == ["call mom", "Add 'call mom' to my tasks"]  # 'pay rent' is another item


def close_after_listing(tools: list[Any], listed: dict[str, Any]) -> dict[str, Any]:
    """The harness's call after the item "show me what is left" listed ``listed``."""
    rows = [planned_row("list_tasks", "what is left", "show me what is left")]
    history = [
        tool_result("create_todo"),
        AIMessage(content=""),
        tool_result("list_tasks", content=json.dumps({"status": "success", **listed})),
    ]

    binding = step_binding(tools, rows, history, None, REQUEST)

    assert binding.reply is not None
    [call] = binding.reply.tool_calls
    return dict(call)


def test_after_a_successful_action_the_harness_closes_the_item_with_what_it_returned(
    tools: list[Any],
) -> None:
    listed = {
        "filter": "pending",
        "count": 2,
        "tasks": [{"title": "buy groceries"}, {"title": "do laundry"}],
    }

    call = close_after_listing(tools, listed)

    assert call["name"] == "complete_todo"
    assert call["args"] == {
        "todoId": "id-1",
        "outcome": "list_tasks: 2 pending task(s): buy groceries; do laundry",
    }


def test_a_listing_marks_the_tasks_done_so_none_passes_for_open(tools: list[Any]) -> None:
    tasks = [{"title": "report", "completed": False}, {"title": "call mom", "completed": True}]

    call = close_after_listing(tools, {"filter": "all", "tasks": tasks})

    # Before: "2 task(s): report; call mom", as if both were still to do.
    assert call["args"]["outcome"] == "list_tasks: 2 task(s), 1 done: report; call mom (done)"


def test_a_failed_action_is_cancelled_with_its_error(tools: list[Any]) -> None:
    rows = [planned_row("complete_task", "dentist", "mark the dentist as done")]
    error = json.dumps({"error": "NOT_FOUND", "message": "No task found matching 'dentist'."})
    history = [tool_result("create_todo"), tool_result("complete_task", error=True, content=error)]

    binding = step_binding(tools, rows, history, None, REQUEST)

    assert binding.reply is not None
    [call] = binding.reply.tool_calls
    assert call["args"]["status"] == "cancelled"
    assert call["args"]["outcome"] == "complete_task failed: No task found matching 'dentist'."


def test_one_failed_action_of_an_item_the_model_works_gets_another_try(tools: list[Any]) -> None:
    rows = [row("buy groceries", "in_progress")]
    history = [tool_result("create_todo"), tool_result("add_task", error=True)]

    assert step_binding(tools, rows, history, None, REQUEST).tool_choice == DISPATCH_TOOL


async def test_a_finished_plan_is_answered_from_its_rows_without_the_model(
    tools: list[Any],
) -> None:
    from agent.prompting.compact_tools import bind_step

    rows = [row("buy groceries", "completed", outcome="added 'buy groceries'")]
    binding = step_binding(tools, rows, [tool_result("complete_todo")], None, REQUEST)
    unusable = CompatibleChatOpenAI(
        model="local", base_url="http://127.0.0.1:9/v1", api_key=SecretStr("x"), max_retries=0
    )

    answer = await bind_step(unusable, binding, rows).ainvoke([])

    assert binding.phase == "answer"
    assert "buy groceries" in answer.content
    assert "added 'buy groceries'" in answer.content


def test_the_dispatch_call_reaches_the_tools_node_as_the_real_tool_call() -> None:
    message = AIMessage(
        content="",
        tool_calls=[
            {
                "name": DISPATCH_TOOL,
                "args": {"name": "add_task", "arguments": {"title": "buy groceries"}},
                "id": "call-1",
            }
        ],
    )

    [call] = unwrap_dispatch(message).tool_calls

    assert (call["name"], call["args"], call["id"]) == (
        "add_task",
        {"title": "buy groceries"},
        "call-1",
    )


def test_the_plan_goes_last_so_the_system_prompt_is_identical_across_calls() -> None:
    rows = [row("buy groceries", "in_progress")]

    def prompt(rows: list[TurnTodo]) -> list[Any]:
        return model_messages(
            base_prompt="stable",
            history=[HumanMessage(REQUEST, id="h")],
            history_limit=4,
            rows=rows,
            turn_request=REQUEST,
            turn_message_id="h",
            profile=COMPACT,
        )

    first, later = prompt(rows), prompt([row("buy groceries", "completed", outcome="ok")])

    assert first[0] == later[0] == SystemMessage(content="stable")
    assert "buy groceries" in first[-1].content
    assert first[-1].content != later[-1].content


def test_local_token_cap_is_sent_as_max_tokens() -> None:
    """llama-cpp-python's server ignores ``max_completion_tokens`` (what langchain-openai sends):
    without this, a capped call could run until the context is full."""
    model = CompatibleChatOpenAI(
        model="local",
        base_url="http://127.0.0.1:9/v1",
        api_key=SecretStr("x"),
        max_tokens=64,
        legacy_max_tokens=True,
    )

    payload = model._get_request_payload([HumanMessage("hi")])

    assert payload["max_tokens"] == 64
    assert "max_completion_tokens" not in payload
    assert json.dumps(payload)  # still one JSON body


def test_a_one_step_request_is_done_without_a_plan_and_answered_from_its_result(
    tools: list[Any],
) -> None:
    request = "add 'call mom' to my tasks"

    act = step_binding(tools, [], [HumanMessage(request)], None, request)

    assert act.reply is not None
    [call] = act.reply.tool_calls
    assert (call["name"], call["args"]) == ("add_task", {"title": "call mom"})
    added = json.dumps({"status": "success", "title": "call mom"})
    history = [HumanMessage(request), act.reply, tool_result("add_task", content=added)]

    answer = step_binding(tools, [], history, None, request)

    assert answer.phase == "answer" and answer.reply is not None
    assert answer.reply.content.strip() == "Done: add_task: call mom"


def test_a_one_step_request_must_still_be_planned_when_planning_is_always(
    tools: list[Any],
) -> None:
    request = "add 'call mom' to my tasks"

    binding = step_binding(tools, [], [HumanMessage(request)], "create_todo", request)

    assert binding.reply is not None
    [call] = binding.reply.tool_calls
    assert call["name"] == "create_todo"
    assert [item["title"] for item in call["args"]["items"]] == ["call mom"]


def test_results_of_an_earlier_turn_do_not_count_as_this_turns_action(
    tools: list[Any],
) -> None:
    earlier = tool_result("add_task", content=json.dumps({"title": "milk"}))
    request = "add 'call mom' to my tasks"

    binding = step_binding(tools, [], [earlier, HumanMessage(request)], None, request)

    assert binding.phase == "act"


def test_items_listed_under_a_heading_take_its_verb_and_a_closing_each_of_them_adds_nothing(
    tools: list[Any],
) -> None:
    request = (
        "I need to remember three things: pick up the dry cleaning, email Sarah about the "
        "budget, and buy a birthday card for Tom. Please add each of them as a separate task."
    )

    binding = step_binding(tools, [], [HumanMessage(request)], "create_todo", request)

    assert binding.reply is not None
    [call] = binding.reply.tool_calls
    assert [item["title"] for item in call["args"]["items"]] == [
        "pick up the dry cleaning",
        "email Sarah about the budget",
        "buy a birthday card for Tom",
    ]


def looked_up_history(
    tools: list[Any], request: str, tasks: list[tuple[str, str]], rows: list[TurnTodo] = ()
) -> list[Any]:
    """The turn after the harness's lookup call for the step, with ``tasks`` (id, title) listed."""
    history: list[Any] = [HumanMessage(request)]
    lookup = step_binding(tools, list(rows), history, None, request)
    assert lookup.reply is not None, "an action on an existing task first lists the tasks"
    [call] = lookup.reply.tool_calls
    listed = {"status": "success", "tasks": [{"id": i, "title": t} for i, t in tasks]}
    result = ToolMessage(
        content=json.dumps(listed), tool_call_id=call["id"], name=call["name"], status="success"
    )
    return [*history, lookup.reply, result]


def test_a_rename_takes_the_new_title_from_the_second_quote(tools: list[Any]) -> None:
    request = "Rename my task 'call grandma' to 'call grandma on Sunday'."

    history = looked_up_history(tools, request, [("t-1", "call grandma")])

    binding = step_binding(tools, [], history, None, request)

    assert binding.reply is not None
    [call] = binding.reply.tool_calls
    assert (call["name"], call["args"]) == (
        "update_task",
        {"task_identifier": "t-1", "new_title": "call grandma on Sunday"},
    )


async def test_a_lone_step_the_model_names_is_done_without_a_plan_when_planning_is_auto(
    tools: list[Any],
) -> None:
    from agent.prompting.compact_tools import bind_step

    request = "a table at Luigi's tonight"
    binding = step_binding([*tools, book_table_tool()], [], [HumanMessage(request)], None, request)
    [key] = binding.tools[0]["function"]["parameters"]["properties"]
    choice = AIMessage(
        content="",
        tool_calls=[{"name": "plan_steps", "args": {key: "book_table"}, "id": "call-plan"}],
    )

    message = await bind_step(ScriptedChatModel(script=[choice]), binding).ainvoke([])

    [call] = message.tool_calls
    assert (call["name"], call["args"]) == (
        "book_table",
        {"restaurant": "table at Luigi's tonight"},
    )


def test_a_turn_that_must_plan_records_a_request_no_tool_does_as_a_cancelled_item(
    tools: list[Any],
) -> None:

    request = "Email my boss the list"
    plan = step_binding(tools, [], [HumanMessage(request)], "create_todo", request)
    assert plan.reply is not None
    [item] = plan.reply.tool_calls[0]["args"]["items"]
    context = item["context"]
    row = TurnTodo(
        id="id-1", title=item["title"], status="in_progress", priority=0, context=context
    )

    close = step_binding(tools, [row], [tool_result("create_todo")], None, request)

    assert close.reply is not None
    [call] = close.reply.tool_calls
    assert call["args"]["status"] == "cancelled"
    assert "no tool" in call["args"]["outcome"]


def test_a_verb_two_toolsets_share_goes_to_the_list_the_step_names(
    tools: list[Any], tmp_path: Any
) -> None:
    from agent.tools.conversation_tasks import build_conversation_task_tools

    both = [*tools, *build_conversation_task_tools(tmp_path)]
    request = (
        "Put 'review pull request 42' on this conversation's task list, and add "
        "'renew gym membership' to my personal tasks."
    )

    binding = step_binding(both, [], [HumanMessage(request)], None, request)

    assert binding.reply is not None
    [call] = binding.reply.tool_calls
    contexts = [_planned_tool(item["context"]) for item in call["args"]["items"]]
    assert contexts == ["AddTask", "add_task"]  # the unnamed place is the default toolset's


def test_the_conversation_task_list_alone_is_planned_by_its_verbs(tmp_path: Any) -> None:
    from agent.tools.conversation_tasks import build_conversation_task_tools

    database = Database("sqlite+aiosqlite:///:memory:")
    tools = [*build_todo_tools(database), *build_conversation_task_tools(tmp_path)]
    request = "put 'draft the outline' and 'collect references' on our list, then show it"

    binding = step_binding(tools, [], [HumanMessage(request)], "create_todo", request)

    assert binding.reply is not None
    [call] = binding.reply.tool_calls
    contexts = [_planned_tool(item["context"]) for item in call["args"]["items"]]
    assert contexts == ["AddTask", "AddTask", "ListTasks"]


def test_items_quoted_in_one_list_are_added_without_the_model_and_without_descriptions(
    tools: list[Any],
) -> None:
    request = "Please add these to my tasks: 'buy a new charger', 'send the invoice', 'call Bo'"
    plan = step_binding(tools, [], [HumanMessage(request)], "create_todo", request)
    assert plan.reply is not None
    first = plan.reply.tool_calls[0]["args"]["items"][0]
    row = TurnTodo(
        id="id-1", title=first["title"], status="in_progress", priority=0, context=first["context"]
    )

    act = step_binding(tools, [row], [tool_result("create_todo")], None, request)

    assert act.reply is not None
    [call] = act.reply.tool_calls
    assert call["args"] == {"title": "buy a new charger"}


def test_it_points_at_the_words_before_and_is_never_searched_as_a_title(
    tools: list[Any],
) -> None:
    request = "I paid the electricity bill this morning, you can tick it off."

    listed = [("t-1", "call the plumber"), ("t-2", "pay the electricity bill")]
    history = looked_up_history(tools, request, listed)

    binding = step_binding(tools, [], history, None, request)

    # "it" is the words before; the task is found by them, not by a title containing "it".
    assert binding.phase == "act" and binding.reply is not None
    [call] = binding.reply.tool_calls
    assert (call["name"], call["args"]) == ("complete_task", {"task_identifier": "t-2"})


@pytest.mark.parametrize(
    ("request_text", "calls"),
    [
        ("Please continue", ["continue_open_todos"]),
        ("finish the rest", ["continue_open_todos"]),  # not complete_task on "the rest"
        ("carry on, then add 'delta' to my tasks", ["continue_open_todos", "create_todo"]),
        ("continue adding 'delta' to my tasks", []),  # about 'delta', not the open plan
        ("finish 'buy milk'", []),
    ],
)
def test_a_step_asking_to_continue_is_the_continuation_when_rows_are_open(
    tools: list[Any], request_text: str, calls: list[str]
) -> None:
    database = Database("sqlite+aiosqlite:///:memory:")
    bound = [*tools, build_continue_tool(database)]

    binding = step_binding(bound, [], [HumanMessage(request_text)], None, request_text)

    made = [call["name"] for call in binding.reply.tool_calls] if binding.reply else []
    assert ("continue_open_todos" in made) == bool(calls)
    if calls:
        assert made == calls
    # The model is never offered the continuation as a choice for a step.
    offered = json.dumps(binding.tools)
    assert "continue_open_todos" not in offered
