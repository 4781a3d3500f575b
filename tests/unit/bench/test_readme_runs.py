"""README's five-run table counts a run correct only when the whole request was done."""

from __future__ import annotations

from bench.readme_runs import ReadmeRun, table

LISTED = "- show me what is left: list_tasks: 2 task(s): buy groceries; do laundry"


def run(tasks: list[str], answer: str = LISTED, status: str = "answered") -> ReadmeRun:
    return ReadmeRun(1.0, status, 1, ["buy groceries", "do laundry", "show me"], tasks, answer)


def test_the_two_tasks_and_an_answer_that_lists_them_is_correct() -> None:
    assert run(["buy groceries", "do laundry"]).correct


def test_a_duplicate_task_a_missing_list_or_another_status_is_not() -> None:
    assert not run(["buy groceries", "do laundry", "buy groceries"]).correct
    assert not run(["buy groceries", "do laundry"], answer="Everything is done.").correct
    assert not run(["buy groceries", "do laundry"], status="stalled").correct


def test_the_table_counts_the_correct_runs() -> None:
    text = table([run(["buy groceries", "do laundry"]), run(["buy groceries"])])

    assert "Whole request correct in 1 of 2 runs." in text
    assert "| 2 | 1.0 s | answered, 1 LLM call(s) |" in text
