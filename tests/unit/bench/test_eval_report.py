"""The evaluation's report: Wilson intervals, the per-system table and the failed checks."""

from __future__ import annotations

import pytest

from bench.eval.cli import progress_line
from bench.eval.report import RunRecord, markdown, summarise, wilson_interval


def test_wilson_interval_matches_known_values() -> None:
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4)
    assert high == pytest.approx(0.9433, abs=1e-4)
    assert wilson_interval(0, 5)[0] == 0.0 and wilson_interval(5, 5)[1] == 1.0
    low, high = wilson_interval(5, 5)
    assert low == pytest.approx(0.5655, abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def record(system: str, request: str, success: bool, **fields: object) -> RunRecord:
    values: dict[str, object] = {
        "system": system,
        "request": request,
        "repeat": 0,
        "success": success,
        "llm_calls": 4,
        "prompt_tokens": 1000,
        "completion_tokens": 100,
        "seconds": 2.0,
        "items": 2,
        "failed_checks": [] if success else ["the answer does not show 'x'"],
    }
    values.update(fields)
    return RunRecord(**values)  # type: ignore[arg-type]


RECORDS = [
    record("turnplan-auto", "add", True),
    record("turnplan-auto", "list", False),
    record("todolist", "add", True, prompt_tokens=3000),
    record("todolist", "list", False, error="TimeoutError: x", failed_checks=["error: x"]),
]


def test_summary_counts_tokens_per_completed_item_over_all_runs() -> None:
    summary = summarise("todolist", RECORDS[2:])
    assert (summary.runs, summary.successes) == (2, 1)
    assert summary.prompt_per_run == 2000
    # (3000 + 100 + 1000 + 100) tokens over the 2 items of the one successful run
    assert summary.tokens_per_item == 2100
    assert summarise("none", [record("x", "r", False)]).tokens_per_item is None


def test_markdown_has_the_table_per_system_and_the_failed_checks() -> None:
    text = markdown(RECORDS, {"model": "openai:test"})
    assert "- model: openai:test" in text
    assert "| turnplan-auto | 2 | 1/2 (50 %) | 9 % to 91 % | 4.0 | 1,000 | 100 | 1,100 |" in text
    assert "| add | 1/1 | 1/1 |" in text and "| list | 0/1 | 0/1 |" in text
    assert "- **list**, turnplan-auto:\n  - run 1: the answer does not show 'x'" in text
    assert "- **list**, todolist:\n  - run 1: error: x" in text


def test_all_passing_says_so() -> None:
    assert "None: every run passed every check." in markdown(RECORDS[:1], {})


def test_progress_line_shows_the_bar_and_the_first_failed_check() -> None:
    line = progress_line(2, 4, RECORDS[1])
    assert line.startswith("[##########----------] 2/4 turnplan-auto list #1: FAILED (the answer")
    assert progress_line(4, 4, RECORDS[0]).endswith("ok 2.0 s, 4 calls")


def test_the_status_table_counts_the_audits_false_alarms_and_misses() -> None:
    records = [
        record("turnplan-audit", "add", True, turn_status="answered", audit_calls=1),
        record("turnplan-audit", "list", True, turn_status="incomplete", audit_calls=2),
        record("turnplan-audit", "show", False, turn_status="answered", audit_calls=1),
        record("todolist", "add", True),
    ]
    text = markdown(records, {})
    assert "| turnplan-audit | answered 2, incomplete 1 | 1.3 | 0.0 | 1 | 1 |" in text
    assert "| todolist |" not in text.split("## Turn status")[1].split("## Failed")[0]
    assert "## Turn status" not in markdown(RECORDS, {})


def test_the_class_table_shows_success_and_harm_per_part_and_class() -> None:
    records = [
        record("turnplan-auto", "a", True, group="harm"),
        record("turnplan-auto", "b", False, group="harm", harm=["personal tasks: deleted 'x'"]),
        record("turnplan-auto", "c", True, group="harm", part="untuned", paused=True),
        record("turnplan-auto", "d", False, group="quotes", part="untuned", seconds=4.0),
    ]
    text = markdown(records, {})
    assert "| turnplan-auto | tuning | harm | 2 | 1/2 (50 %) | 1/2 (50 %) | 0 | 2.0 |" in text
    assert (
        "| turnplan-auto | **tuning** | **all** | 2 | 1/2 (50 %) | 1/2 (50 %) | 0 | 2.0 |" in text
    )
    assert "| turnplan-auto | untuned | harm | 1 | 1/1 (100 %) | 0/1 (0 %) | 1 | 2.0 |" in text
    assert "| turnplan-auto | untuned | quotes | 1 | 0/1 (0 %) | 0/1 (0 %) | 0 | 4.0 |" in text
    assert "| turnplan-auto | **all** | **all** | 4 | 2/4 (50 %) | 1/4 (25 %) | 1 | 2.5 |" in text
    assert "HARM: personal tasks: deleted 'x'" in text
    harmed = progress_line(1, 1, records[1])
    assert "FAILED (the answer does not show 'x') HARM (personal tasks: deleted 'x')" in harmed


def test_untuned_requests_count_but_are_not_named_unless_asked() -> None:
    records = [
        record("turnplan-auto", "tuned-one", False, group="harm"),
        record(
            "turnplan-auto",
            "secret-one",
            False,
            group="harm",
            part="untuned",
            failed_checks=["expected ['buy pears']"],
            harm=["personal tasks: added 'buy apples'"],
        ),
    ]
    text = markdown(records, {})
    assert "| turnplan-auto | untuned | harm | 1 | 0/1 (0 %) | 1/1 (100 %) | 0 | 2.0 |" in text
    assert "secret-one" not in text and "pears" not in text and "apples" not in text
    assert "tuned-one" in text and "The 1 untuned requests are counted above" in text
    shown = markdown(records, {}, show_untuned=True)
    assert "secret-one" in shown and "buy apples" in shown
    line = progress_line(2, 2, records[1])
    assert "(untuned) #1: FAILED HARM 2.0 s" in line and "apples" not in line
    assert "secret-one" in progress_line(2, 2, records[1], show_untuned=True)
