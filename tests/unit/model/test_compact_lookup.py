"""The compact profile finds the task a step acts on from the user's words, and never acts on
a guess: words that name no task without doubt make it ask which, or say nothing changed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage

from agent.prompting.compact_lookup import matching_task
from agent.prompting.compact_plan import PlannedAction, stored_action
from agent.prompting.compact_tools import step_binding
from agent.prompting.compact_verbs import TASK_VERBS
from agent.prompting.request_steps import RequestStep, core_phrase, verb_at_start
from agent.tools.conversation_tasks import build_conversation_task_tools
from agent.tools.personal_tasks import build_task_tools
from agent.tools.todos import build_todo_tools
from storage import Database
from storage.models import TurnTodo

TASKS = [
    {"id": "t-1", "title": "wash the car"},
    {"id": "t-2", "title": "mow the lawn"},
    {"id": "t-3", "title": "pay the electricity bill"},
]


@pytest.fixture
def tools() -> list[Any]:
    database = Database("sqlite+aiosqlite:///:memory:")
    return [*build_todo_tools(database), *build_task_tools(database)]


@pytest.mark.parametrize(
    ("words", "quoted", "expected"),
    [
        ("Mow the lawn", True, "t-2"),  # the title itself, any case
        ("washed the car", False, "t-1"),  # stems meet: washed / wash
        ("mowed the lawn today", False, "t-2"),
        ("paid the electricity bill this morning", False, "t-3"),  # paid / pay
    ],
)
def test_the_users_words_find_the_listed_task(words: str, quoted: bool, expected: str) -> None:
    task = matching_task(words, TASKS, quoted=quoted)

    assert task is not None and task["id"] == expected


@pytest.mark.parametrize(
    ("words", "quoted"),
    [
        ("walk the dog", False),  # no shared word
        ("washed the lawn", False),  # as near to two tasks: no guess
        ("washed the car", True),  # quoted words are a title: no fuzzy match
        ("the", False),  # only words that say nothing
        ("electricity", False),  # part of a title is not the title: the user is asked
        ("it", False),  # "it" is inside "submit", never a title
        ("the bill", False),
    ],
)
def test_words_that_name_no_task_or_two_find_none(words: str, quoted: bool) -> None:
    assert matching_task(words, TASKS, quoted=quoted) is None


def lookup_history(binding: Any, request: str, tasks: list[dict[str, Any]]) -> list[Any]:
    [call] = binding.reply.tool_calls
    result = ToolMessage(
        content=json.dumps({"tasks": tasks}), tool_call_id=call["id"], name=call["name"]
    )
    return [HumanMessage(request), binding.reply, result]


def test_an_action_on_an_existing_task_lists_the_tasks_first_and_completes_the_one_meant(
    tools: list[Any],
) -> None:
    request = "I paid the electricity bill this morning, you can tick it off."

    lookup = step_binding(tools, [], [HumanMessage(request)], None, request)

    assert lookup.reply is not None
    [call] = lookup.reply.tool_calls
    assert (call["name"], call["args"]) == ("list_tasks", {})
    history = lookup_history(lookup, request, TASKS)

    act = step_binding(tools, [], history, None, request)

    # The listing is not the action: the turn is not answered from it, the task is completed.
    assert act.phase == "act" and act.reply is not None
    [call] = act.reply.tool_calls
    assert (call["name"], call["args"]) == ("complete_task", {"task_identifier": "t-3"})


def test_words_no_listed_task_shares_are_no_action_and_the_answer_says_so(
    tools: list[Any],
) -> None:
    request = "Mark 'walk the dog' as done."
    lookup = step_binding(tools, [], [HumanMessage(request)], None, request)
    history = lookup_history(lookup, request, [{"id": "t-9", "title": "feed the cat"}])

    act = step_binding(tools, [], history, None, request)

    # No tool is called with the user's words (the tool's own partial match could pick one).
    assert act.reply is not None and not act.reply.tool_calls
    assert act.reply.text.startswith("Not done:")
    assert 'no task of yours is called "walk the dog"' in act.reply.text


def test_words_that_only_part_of_a_title_shares_ask_the_user_which_task(
    all_tools: list[Any],
) -> None:
    request = "Delete the call task."
    listed = [{"id": "t-1", "title": "call mom"}, {"id": "t-2", "title": "call dad"}]
    lookup = step_binding(all_tools, [], [HumanMessage(request)], None, request)
    history = lookup_history(lookup, request, listed)

    ask = step_binding(all_tools, [], history, None, request)

    assert ask.reply is not None
    [call] = ask.reply.tool_calls
    assert call["name"] == "ask_user"
    assert call["args"] == {
        "question": 'Which task do you mean by "call"?',
        "options": ["call mom", "call dad"],
    }
    answer = ToolMessage(content="call dad", tool_call_id=call["id"], name="ask_user")

    act = step_binding(all_tools, [], [*history, ask.reply, answer], None, request)

    assert act.reply is not None
    [call] = act.reply.tool_calls
    assert (call["name"], call["args"]) == ("delete_task", {"task_identifier": "t-2"})


@pytest.mark.parametrize("answer", ["neither", "The user declined to answer", "3"])
def test_an_answer_that_picks_no_task_changes_nothing_and_says_so(
    all_tools: list[Any], answer: str
) -> None:
    request = "Delete the call task."
    listed = [{"id": "t-1", "title": "call mom"}, {"id": "t-2", "title": "call dad"}]
    lookup = step_binding(all_tools, [], [HumanMessage(request)], None, request)
    history = lookup_history(lookup, request, listed)
    ask = step_binding(all_tools, [], history, None, request)
    assert ask.reply is not None
    call_id = ask.reply.tool_calls[0]["id"]
    reply = ToolMessage(content=answer, tool_call_id=call_id, name="ask_user")

    act = step_binding(all_tools, [], [*history, ask.reply, reply], None, request)

    assert act.reply is not None and not act.reply.tool_calls
    assert "nothing was changed" in act.reply.text


def test_without_ask_user_words_that_name_no_task_are_answered_not_acted_on(
    tools: list[Any],
) -> None:
    request = "Delete the call task."
    listed = [{"id": "t-1", "title": "call mom"}, {"id": "t-2", "title": "call dad"}]
    lookup = step_binding(tools, [], [HumanMessage(request)], None, request)

    act = step_binding(tools, [], lookup_history(lookup, request, listed), None, request)

    assert act.reply is not None and not act.reply.tool_calls
    assert "'call mom', 'call dad'" in act.reply.text


@pytest.fixture
def all_tools() -> list[Any]:
    """The supervisor's tools with ``ask_user``, as the graph binds them."""
    from agent.tools.ask_user import build_ask_user_tool

    database = Database("sqlite+aiosqlite:///:memory:")
    return [
        *build_todo_tools(database),
        *build_task_tools(database),
        build_ask_user_tool(database),
    ]


def test_a_conversation_task_is_completed_by_the_id_its_list_gives(tmp_path: Any) -> None:
    database = Database("sqlite+aiosqlite:///:memory:")
    tools = [*build_todo_tools(database), *build_conversation_task_tools(tmp_path)]
    action = PlannedAction("CompleteTask", "write the intro", "Check off 'write the intro'")
    row = TurnTodo(
        id="r-1", title="x", status="in_progress", priority=0, context=action.as_context()
    )
    request = "Check off 'write the intro' on our task list here and show me what remains."
    after_plan = [
        HumanMessage(request),
        ToolMessage(content="{}", tool_call_id="c", name="create_todo"),
    ]

    lookup = step_binding(tools, [row], after_plan, None, request)

    assert lookup.reply is not None
    [call] = lookup.reply.tool_calls
    assert call["name"] == "ListTasks"
    listed = [{"id": "1", "title": "write the conclusion"}, {"id": "2", "title": "write the intro"}]
    result = ToolMessage(
        content=json.dumps({"tasks": listed}), tool_call_id=call["id"], name="ListTasks"
    )

    act = step_binding(tools, [row], [*after_plan, lookup.reply, result], None, request)

    assert act.phase == "act" and act.reply is not None
    [call] = act.reply.tool_calls
    assert (call["name"], call["args"]) == ("CompleteTask", {"taskId": "2"})


def test_check_both_off_completes_the_two_things_said_before_it(tools: list[Any]) -> None:
    request = (
        "I washed the car and mowed the lawn today, so check both off. "
        "Also add 'buy fertilizer' for next weekend."
    )

    binding = step_binding(tools, [], [HumanMessage(request)], "create_todo", request)

    assert binding.reply is not None
    [call] = binding.reply.tool_calls
    actions = [stored_action(item["context"]) for item in call["args"]["items"]]
    assert [(action.tool, action.target) for action in actions if action] == [
        ("complete_task", "washed the car"),
        ("complete_task", "mowed the lawn today"),
        ("add_task", "buy fertilizer"),
    ]


def test_that_task_points_at_the_one_thing_said_before_it(tools: list[Any]) -> None:
    request = (
        "I've submitted the expense report, mark that task done, and add 'file it' to my list."
    )

    binding = step_binding(tools, [], [HumanMessage(request)], "create_todo", request)

    assert binding.reply is not None
    [call] = binding.reply.tool_calls
    [complete, add] = call["args"]["items"]
    action = stored_action(complete["context"])
    assert action is not None
    assert (action.tool, action.target) == ("complete_task", "submitted the expense report")
    assert add["title"] == "file it"


@pytest.mark.parametrize(
    ("words", "verb", "core"),
    [
        ("check both off", "check off", "both"),
        ("tick the dentist one off", "tick off", "dentist one"),
        ("check off the dentist", "check off", "dentist"),
    ],
)
def test_a_verb_with_a_particle_is_found_around_its_object(
    words: str, verb: str, core: str
) -> None:
    assert verb_at_start(words, ["check off", "tick off", "add"]) == verb
    step = RequestStep(words, words, False, words)
    assert core_phrase(step, verb) == core


def test_a_particle_far_from_its_verb_is_no_split_verb() -> None:
    words = "check whether the garage door was left open and then turn the lights off"

    assert verb_at_start(words, TASK_VERBS["complete"]) is None


@pytest.fixture
def delegating_tools() -> list[Any]:
    """The supervisor's tools when the personal tasks are only a worker's (``workers: tasks``)."""
    from agent.tools.delegate import delegation_tools
    from agent.tools.task_worker import build_task_worker
    from agent.workers.registry import WorkerRegistry

    database = Database("sqlite+aiosqlite:///:memory:")
    registry = WorkerRegistry([build_task_worker("local", database)])
    return [*build_todo_tools(database), *delegation_tools(registry, database)]


def test_a_step_a_workers_tool_does_is_planned_for_that_worker(
    delegating_tools: list[Any],
) -> None:
    request = "Add 'prepare slides for Monday' and 'print the handouts' to my tasks."

    binding = step_binding(delegating_tools, [], [HumanMessage(request)], None, request)

    # Two items, each with the worker's agentType; a lone one would be planned too (delegate
    # needs a row), and no model is asked.
    assert binding.reply is not None
    [call] = binding.reply.tool_calls
    assert call["name"] == "create_todo"
    assert [(item["title"], item["agentType"]) for item in call["args"]["items"]] == [
        ("prepare slides for Monday", "tasks"),
        ("print the handouts", "tasks"),
    ]


def test_an_item_for_a_worker_is_delegated_and_the_worker_does_its_action_without_its_model(
    delegating_tools: list[Any],
) -> None:
    from agent.prompting.compact_worker import worker_step
    from prompts import render_prompt

    action = PlannedAction("complete_task", "submitted the expense report", "mark that task done")
    row = TurnTodo(
        id="r-1",
        title="mark that task done",
        status="in_progress",
        priority=0,
        context=action.as_context(),
        agentType="tasks",
    )
    request = "I've submitted the expense report, mark that task done."
    after_plan = [
        HumanMessage(request),
        ToolMessage(content="{}", tool_call_id="c", name="create_todo"),
    ]

    act = step_binding(delegating_tools, [row], after_plan, None, request)

    assert act.reply is not None
    [call] = act.reply.tool_calls
    assert (call["name"], call["args"]) == ("delegate", {"todoId": "r-1"})

    # The worker, handed the item, lists the tasks, completes the one meant, and reports.
    worker_tools = build_task_tools(Database("sqlite+aiosqlite:///:memory:"))
    hand_over = HumanMessage(
        render_prompt(
            "worker_request",
            title=row.title,
            context=row.context,
            criteria="(not stated)",
            request=request,
        )
    )
    lookup = worker_step(worker_tools, [hand_over])
    assert lookup is not None and lookup.tool_calls[0]["name"] == "list_tasks"
    listed = json.dumps({"tasks": [{"id": "t-7", "title": "submit the expense report"}]})
    lookup_id = lookup.tool_calls[0]["id"]
    history = [hand_over, lookup, ToolMessage(listed, tool_call_id=lookup_id, name="list_tasks")]

    acted = worker_step(worker_tools, history)

    assert acted is not None
    assert acted.tool_calls[0]["args"] == {"task_identifier": "t-7"}
    done = json.dumps({"status": "success", "title": "submit the expense report"})
    result = ToolMessage(content=done, tool_call_id=acted.tool_calls[0]["id"], name="complete_task")

    answer = worker_step(worker_tools, [*history, acted, result])

    assert answer is not None and not answer.tool_calls
    assert "submit the expense report" in answer.text


def test_a_worker_handed_an_item_without_a_planned_action_asks_its_model() -> None:
    from agent.prompting.compact_worker import worker_step

    worker_tools = build_task_tools(Database("sqlite+aiosqlite:///:memory:"))

    assert worker_step(worker_tools, [HumanMessage("Step: tidy up\nContext: (none)")]) is None


def test_a_worker_reporting_its_action_failed_gets_the_item_cancelled(
    delegating_tools: list[Any],
) -> None:
    action = PlannedAction("complete_task", "walk the dog", "mark 'walk the dog' as done")
    row = TurnTodo(
        id="r-1",
        title="complete task 'walk the dog'",
        status="in_progress",
        priority=0,
        context=action.as_context(),
        agentType="tasks",
    )
    report = {
        "todoId": "r-1",
        "agentType": "tasks",
        "result": "Not done: complete_task failed: No task matches 'walk the dog'.",
        "toolCalls": 2,
    }
    history = [
        HumanMessage("Mark 'walk the dog' as done."),
        ToolMessage(content="{}", tool_call_id="c", name="create_todo"),
        ToolMessage(content=json.dumps(report), tool_call_id="d", name="delegate"),
    ]

    close = step_binding(delegating_tools, [row], history, None, "")

    assert close.phase == "close" and close.reply is not None
    args = close.reply.tool_calls[0]["args"]
    assert args["status"] == "cancelled"
    assert "No task matches 'walk the dog'" in args["outcome"]


def test_a_worker_whose_tools_declare_no_verbs_is_still_the_models_choice() -> None:
    from langchain_core.tools import tool

    from agent.prompting.compact_plan import planning_tools
    from agent.tools.delegate import delegation_tools
    from agent.workers.react import build_worker
    from agent.workers.registry import WorkerRegistry

    @tool
    def book_table(restaurant: str) -> str:
        """Book a table at a restaurant."""
        return restaurant

    database = Database("sqlite+aiosqlite:///:memory:")
    worker = build_worker(
        "dining", "Books tables.", model="local", tools=[book_table], prompt_sections=()
    )
    [delegate] = delegation_tools(WorkerRegistry([worker]), database)

    assert [tool.name for tool in planning_tools([delegate])] == ["delegate"]


def test_a_light_verb_of_a_title_need_not_be_said_when_no_other_title_shares_the_words() -> None:
    tasks = [{"id": "g", "title": "go to the gym"}, {"id": "l", "title": "do the laundry"}]

    assert matching_task("the gym", tasks, quoted=False) == tasks[0]
    assert matching_task("laundry", tasks, quoted=False) == tasks[1]
    # Another title shares "gym": there is doubt, and no task is picked.
    doubt = [*tasks, {"id": "m", "title": "pay the gym membership"}]
    assert matching_task("the gym", doubt, quoted=False) is None
