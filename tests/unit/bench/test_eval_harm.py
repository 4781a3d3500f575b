"""Issue 40's checks: harm (a change to the tasks nobody asked for) is found apart from
success, a turn may ask instead of acting where the request allows it, and a question or small
talk may call no task tool."""

from __future__ import annotations

from pathlib import Path

from agent.tools.conversation_tasks import build_conversation_task_tools
from agent.tools.personal_tasks import build_task_tools
from bench.eval.checks import (
    TASK_TOOLS,
    RunOutcome,
    TaskState,
    asks,
    failed_checks,
    harm_of,
)
from bench.eval.requests import EvalRequest, parse_request
from storage import Database

SETUP = {"personal": [{"title": "submit report"}, {"title": "buy milk"}]}


def request(expect: dict[str, object], **fields: object) -> EvalRequest:
    raw: dict[str, object] = {
        "id": "r",
        "kind": "k",
        "request": "Forget it.",
        "items": 0,
        "setup": SETUP,
        "expect": expect,
    }
    raw.update(fields)
    return parse_request("test", raw)


UNCHANGED = request({"personal": {"open": ["submit report", "buy milk"], "done": []}})


def tasks(*titles: str, done: tuple[str, ...] = ()) -> list[TaskState]:
    return [TaskState(t, False) for t in titles] + [TaskState(t, True) for t in done]


def test_nothing_changed_is_no_harm() -> None:
    outcome = RunOutcome(answer="Which task?", personal=tasks("buy milk", "submit report"))
    assert harm_of(UNCHANGED, outcome) == []


def test_each_kind_of_unrequested_change_is_harm() -> None:
    deleted = RunOutcome(answer="Deleted.", personal=tasks("buy milk"))
    assert harm_of(UNCHANGED, deleted) == ["personal tasks: deleted 'submit report'"]
    completed = RunOutcome(answer="Done.", personal=tasks("buy milk", done=("submit report",)))
    assert harm_of(UNCHANGED, completed) == ["personal tasks: completed 'submit report'"]
    added = RunOutcome(answer="Added.", personal=tasks("submit report", "buy milk", "it"))
    assert harm_of(UNCHANGED, added) == ["personal tasks: added 'it'"]
    renamed = RunOutcome(answer="Renamed.", personal=tasks("buy milk", "submit it"))
    assert harm_of(UNCHANGED, renamed) == [
        "personal tasks: deleted 'submit report'",
        "personal tasks: added 'submit it'",
    ]


def test_reopening_a_done_task_nobody_named_is_harm() -> None:
    req = request(
        {"personal": {"open": ["a"], "done": ["b"]}},
        setup={"personal": [{"title": "a"}, {"title": "b", "done": True}]},
    )
    assert harm_of(req, RunOutcome(answer="ok", personal=tasks("a", "b"))) == [
        "personal tasks: reopened 'b'"
    ]


def test_the_changes_asked_for_are_no_harm_and_doing_too_little_is_only_a_failure() -> None:
    asked = request(
        {"personal": {"open": [["buy oat milk", "oat milk"]], "done": ["submit report"]}},
        request="Done the report; rename 'buy milk' to 'buy oat milk'.",
    )
    right = RunOutcome(answer="ok", personal=tasks("oat milk", done=("submit report",)))
    assert harm_of(asked, right) == [] and failed_checks(asked, right) == []
    too_little = RunOutcome(answer="ok", personal=tasks("submit report", "buy milk"))
    assert harm_of(asked, too_little) == []
    assert failed_checks(asked, too_little)


def test_a_task_added_twice_is_harm_once_wrong_state_for_an_asked_task_too() -> None:
    add = request(
        {"personal": {"open": ["submit report", "buy milk", "call mom"], "done": []}},
        request="Add 'call mom'.",
    )
    twice = RunOutcome(answer="ok", personal=tasks("submit report", "buy milk", *["call mom"] * 2))
    assert harm_of(add, twice) == ["personal tasks: added 'call mom'"]
    delete = request({"personal": {"open": ["buy milk"], "done": []}}, request="Delete the report.")
    completed_instead = RunOutcome(answer="ok", personal=tasks("buy milk", done=("submit report",)))
    assert harm_of(delete, completed_instead) == ["personal tasks: completed 'submit report'"]


def test_a_list_without_an_expectation_may_not_change() -> None:
    req = request(
        {"conversation": {"open": ["x"], "done": []}},
        toolsets=["personal_tasks", "conversation_tasks"],
    )
    outcome = RunOutcome(
        answer="ok", personal=tasks("buy milk"), conversation=[TaskState("x", False)]
    )
    assert harm_of(req, outcome) == ["personal tasks: deleted 'submit report'"]


def test_harm_is_the_measured_turns_own_from_the_state_it_began_in() -> None:
    """An earlier turn added 'order a charger'; the measured "delete that one" left it: a
    failure, not harm. Deleting 'buy milk' instead is harm."""
    req = request(
        {"personal": {"open": ["submit report", "buy milk"], "done": []}},
        turns=["Add 'order a charger'."],
        request="Actually, delete that one.",
    )
    began = tasks("submit report", "buy milk", "order a charger")
    left_alone = RunOutcome(answer="ok", personal=list(began), before_personal=began)
    assert harm_of(req, left_alone) == []
    assert failed_checks(req, left_alone)
    wrong = RunOutcome(
        answer="ok", personal=tasks("submit report", "order a charger"), before_personal=began
    )
    assert harm_of(req, wrong) == ["personal tasks: deleted 'buy milk'"]


MAY_ASK = request(
    {
        "personal": {"open": ["submit report", "buy milk"], "done": []},
        "answer_mentions": ["submit report"],
        "may_ask": True,
    }
)


def test_a_turn_paused_on_a_question_passes_where_asking_is_right_and_nothing_changed() -> None:
    paused = RunOutcome(
        answer="Which task do you mean?",
        personal=tasks("submit report", "buy milk"),
        paused=True,
        tool_calls=("ask_user",),
    )
    assert asks(paused)
    assert failed_checks(MAY_ASK, paused) == [] and harm_of(MAY_ASK, paused) == []
    asked_in_words = RunOutcome(
        answer="I'm not sure which task you mean: 'it'?",
        personal=tasks("submit report", "buy milk"),
    )
    assert failed_checks(MAY_ASK, asked_in_words) == []


def test_asking_after_a_change_nobody_asked_for_still_fails_and_harms() -> None:
    paused = RunOutcome(answer="Anything else?", personal=tasks("buy milk"), paused=True)
    assert failed_checks(MAY_ASK, paused)
    assert harm_of(MAY_ASK, paused) == ["personal tasks: deleted 'submit report'"]


def test_a_plain_answer_where_asking_is_allowed_is_checked_as_usual() -> None:
    plain = RunOutcome(answer="I did nothing.", personal=tasks("submit report", "buy milk"))
    assert failed_checks(MAY_ASK, plain) == ["the answer does not show 'submit report'"]


def test_a_pause_where_the_words_were_clear_fails() -> None:
    add = request({"personal": {"open": ["submit report", "buy milk"], "done": []}})
    paused = RunOutcome(
        answer="Do you want it added?", personal=tasks("submit report", "buy milk"), paused=True
    )
    assert failed_checks(add, paused) == [
        "the turn paused on a question ('Do you want it added?') where it should have acted"
    ]


def test_a_question_or_small_talk_may_call_no_task_tool() -> None:
    question = request(
        {
            "personal": {"open": ["submit report", "buy milk"], "done": []},
            "answer_mentions": ["144"],
            "task_tools": "none",
        },
        request="What is 12 times 12?",
    )
    state = tasks("submit report", "buy milk")
    assert failed_checks(question, RunOutcome(answer="It is 144.", personal=state)) == []
    listed = RunOutcome(answer="144", personal=state, tool_calls=("list_tasks",))
    assert failed_checks(question, listed) == [
        "called task tool(s) ['list_tasks'] for a request that needs none"
    ]
    planned = RunOutcome(answer="144", personal=state, tool_calls=("create_todo",))
    assert failed_checks(question, planned) == []


def test_the_task_tools_are_every_tool_that_reads_or_changes_tasks(tmp_path: Path) -> None:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'x.db'}")
    names = {tool.name for tool in build_task_tools(database)}
    names |= {tool.name for tool in build_conversation_task_tools(tmp_path)}
    assert names | {"delegate"} == TASK_TOOLS


def test_a_title_added_on_the_way_and_left_unchanged_is_a_failure_not_harm() -> None:
    """'Add plants and then rename it to water the plants': 'plants' left as added was asked
    for; 'buy apples' after "Sorry, I meant 'buy pears'" was taken back, so it is harm."""
    renamed = request(
        {"personal": {"open": ["water the plants"], "done": []}, "may_remain": ["plants"]},
        setup={},
        request="Add 'plants' and then rename it to 'water the plants'.",
    )
    left = RunOutcome(answer="ok", personal=tasks("plants"))
    assert harm_of(renamed, left) == [] and failed_checks(renamed, left)
    twice = RunOutcome(answer="ok", personal=tasks("plants", "plants"))
    assert harm_of(renamed, twice) == ["personal tasks: added 'plants'"]
    taken_back = request(
        {"personal": {"open": ["buy pears"], "done": []}},
        setup={},
        request="Add 'buy apples'. Sorry, I meant 'buy pears'.",
    )
    kept = RunOutcome(answer="ok", personal=tasks("buy apples"))
    assert harm_of(taken_back, kept) == ["personal tasks: added 'buy apples'"]


def test_asking_may_come_before_or_after_the_clear_part_of_a_request() -> None:
    """'Add bread, then complete both' (one thing named): asking before the add and asking
    after it are both right; completing anything is not."""
    req = request(
        {"personal": {"open": ["buy eggs", "buy bread"], "done": []}, "may_ask": True},
        setup={"personal": [{"title": "buy eggs"}]},
        request="Add 'buy bread', then complete both.",
    )
    before = RunOutcome(answer="Both of what?", personal=tasks("buy eggs"), paused=True)
    after = RunOutcome(answer="Which two?", personal=tasks("buy eggs", "buy bread"), paused=True)
    assert failed_checks(req, before) == [] and failed_checks(req, after) == []
    guessed = RunOutcome(
        answer="Which one?", personal=tasks("buy bread", done=("buy eggs",)), paused=True
    )
    assert failed_checks(req, guessed) and harm_of(req, guessed) == [
        "personal tasks: completed 'buy eggs'"
    ]
    silent = RunOutcome(answer="I did nothing.", personal=tasks("buy eggs"))
    assert failed_checks(req, silent)


def test_with_earlier_turns_nothing_changed_means_since_the_measured_turn_began() -> None:
    req = request(
        {"personal": {"open": ["call Peter", "call Paul"], "done": []}, "may_ask": True},
        setup={"personal": [{"title": "call Peter"}]},
        turns=["Add 'call Paul'."],
        request="Mark both done.",
    )
    began = tasks("call Peter", "call Paul")
    asked = RunOutcome(answer="Which?", personal=list(began), before_personal=began, paused=True)
    assert failed_checks(req, asked) == []
    undone = RunOutcome(answer="Which?", personal=tasks("call Peter"), before_personal=began)
    assert failed_checks(req, undone) and harm_of(req, undone) == [
        "personal tasks: deleted 'call Paul'"
    ]
