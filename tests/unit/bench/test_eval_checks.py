"""The evaluation's checks read the end state, not the wording: exact open and done sets, no
duplicates, the titles the answer had to show, "cannot be done" and "no plan"."""

from __future__ import annotations

from bench.eval.checks import RunOutcome, TaskState, failed_checks, normalised, says_cannot
from bench.eval.requests import EvalRequest, parse_request


def request(**fields: object) -> EvalRequest:
    raw = {"id": "r", "kind": "k", "request": "do it", "items": 1, "expect": {}}
    raw.update(fields)
    return parse_request("test", raw)


ADD_TWO = parse_request(
    "test",
    {
        "id": "add-two",
        "kind": "several-item",
        "request": "Add 'a' and 'b', then show what is left.",
        "items": 3,
        "setup": {"personal": [{"title": "old"}]},
        "expect": {
            "personal": {"open": ["old", "Buy milk", ["b", "the b"]], "done": []},
            "answer_mentions": ["old", "Buy milk"],
        },
    },
)


def open_tasks(*titles: str) -> list[TaskState]:
    return [TaskState(title, False) for title in titles]


def test_the_right_end_state_passes_whatever_the_case_spacing_or_spelling() -> None:
    outcome = RunOutcome(
        answer="Left: OLD, buy  milk, the b.", personal=open_tasks("Old", "buy milk.", "the B")
    )
    assert failed_checks(ADD_TWO, outcome) == []


def test_a_missing_task_an_extra_task_and_a_duplicate_each_fail() -> None:
    outcome = RunOutcome(
        answer="old, buy milk",
        personal=open_tasks("old", "buy milk", "buy milk", "add_item1"),
    )
    failures = failed_checks(ADD_TWO, outcome)
    assert "personal tasks: duplicate titles ['buy milk']" in failures
    (open_check,) = [f for f in failures if f.startswith("personal tasks open")]
    assert "missing ['b']" in open_check and "unexpected ['add_item1', 'buy milk']" in open_check


def test_a_task_done_that_should_be_open_fails_both_sets() -> None:
    outcome = RunOutcome(
        answer="old, buy milk",
        personal=[*open_tasks("old", "buy milk"), TaskState("b", True)],
    )
    failures = failed_checks(ADD_TWO, outcome)
    assert any(f.startswith("personal tasks open") and "missing ['b']" in f for f in failures)
    assert any(f.startswith("personal tasks done") and "unexpected ['b']" in f for f in failures)


def test_the_answer_must_show_the_titles_asked_for() -> None:
    outcome = RunOutcome(answer="Done!", personal=open_tasks("old", "buy milk", "b"))
    assert failed_checks(ADD_TWO, outcome) == [
        "the answer does not show 'old'",
        "the answer does not show 'Buy milk'",
    ]


def test_no_answer_fails() -> None:
    outcome = RunOutcome(answer=" ", personal=open_tasks("old", "buy milk", "b"))
    assert "the turn ended without an answer" in failed_checks(ADD_TWO, outcome)


CANNOT = parse_request(
    "test",
    {
        "id": "cannot",
        "kind": "cannot be done",
        "request": "Email my boss my tasks.",
        "items": 1,
        "setup": {"personal": [{"title": "keep", "done": True}, {"title": "open one"}]},
        "expect": {"cannot_do": True},
    },
)


def test_cannot_be_done_passes_when_it_says_so_and_changes_nothing() -> None:
    unchanged = [TaskState("keep", True), TaskState("open one", False)]
    outcome = RunOutcome(answer="Sorry, I can\u2019t send email.", personal=unchanged)
    assert failed_checks(CANNOT, outcome) == []


def test_cannot_be_done_fails_when_it_claims_success_or_changes_the_tasks() -> None:
    unchanged = [TaskState("keep", True), TaskState("open one", False)]
    claimed = failed_checks(CANNOT, RunOutcome(answer="Sent!", personal=unchanged))
    assert claimed == ["the answer does not say the request cannot be done"]
    changed = [*unchanged, TaskState("email my boss", False)]
    failures = failed_checks(CANNOT, RunOutcome(answer="I cannot email.", personal=changed))
    assert failures and "unexpected ['email my boss']" in failures[0]


def test_says_cannot_reads_common_refusals_only() -> None:
    assert says_cannot("I'm unable to do that.")
    assert says_cannot("There is no task called 'walk the dog'.")
    assert not says_cannot("Done: I emailed your boss.")


def test_a_plan_for_a_trivial_request_fails_only_where_the_system_chose_it() -> None:
    trivial = request(expect={"plan": "none"})
    planned = RunOutcome(answer="ok", plan_items=2)
    assert failed_checks(trivial, planned) == [
        "made a plan (2 items) for a request that needs none"
    ]
    forced = RunOutcome(answer="ok", plan_items=2, chooses_plan=False)
    assert failed_checks(trivial, forced) == []


def test_conversation_tasks_are_checked_like_personal_ones() -> None:
    req = request(
        toolsets=["conversation_tasks"],
        expect={"conversation": {"open": ["draft"], "done": ["intro"]}},
    )
    good = RunOutcome(
        answer="ok", conversation=[TaskState("draft", False), TaskState("intro", True)]
    )
    assert failed_checks(req, good) == []
    bad = RunOutcome(answer="ok", conversation=[TaskState("draft", False)])
    assert failed_checks(req, bad) == [
        "conversation tasks done: expected ['intro'], found [] (missing ['intro'])"
    ]


def test_normalised_ignores_case_quotes_spaces_and_a_final_stop() -> None:
    assert normalised("  \u201cBuy   Milk.\u201d ") == "buy milk"
