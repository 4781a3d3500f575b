"""How a ``task_identifier`` is read: id, malformed id, or title."""

from __future__ import annotations

import pytest

from agent.errors import ErrorCode, ToolFailure
from agent.tools.task_lookup import TaskId, TitleQuery, match_title, parse_task_identifier
from storage.models import Task

VALID = "550e8400-e29b-41d4-a716-446655440000"


def test_a_uuid_in_any_case_or_without_hyphens_is_an_id_in_stored_form() -> None:
    assert parse_task_identifier(f"  {VALID.upper()} ") == TaskId(VALID)
    assert parse_task_identifier(VALID.replace("-", "")) == TaskId(VALID)


@pytest.mark.parametrize(
    "text",
    [
        "550e8400-e29b-41d4-a716",  # truncated
        "550e8400-e29b-41d4-a716-4466554400001",  # one digit too many
        "550e8400-e29b-41d4-a716-44665544000g",  # right shape, a non-hex typo
        "550e8400e29b41d4a716",  # hex digits alone, wrong count
    ],
)
def test_a_malformed_id_is_invalid_id_not_a_title_search(text: str) -> None:
    with pytest.raises(ToolFailure) as caught:
        parse_task_identifier(text)
    assert caught.value.code is ErrorCode.INVALID_ID
    assert caught.value.envelope()["status"] == "error"


@pytest.mark.parametrize(
    "text", ["2024 taxes", "add-beef stew", "deadbeef", "cafe", "call mom-dad", "12345678"]
)
def test_ordinary_titles_are_searched_as_titles(text: str) -> None:
    assert parse_task_identifier(text) == TitleQuery(text)


def test_an_empty_identifier_is_a_validation_error() -> None:
    with pytest.raises(ToolFailure) as caught:
        parse_task_identifier("   ")
    assert caught.value.code is ErrorCode.VALIDATION_ERROR


def _task(title: str) -> Task:
    return Task(id=title, user_id="u", title=title, description="", completed=False)


def test_an_exact_title_wins_over_titles_that_contain_it() -> None:
    tasks = [_task("Buy milk and eggs"), _task("buy MILK"), _task("Buy milk for Ana")]
    assert [t.title for t in match_title(tasks, "Buy Milk")] == ["buy MILK"]


def test_partial_matches_are_case_insensitive_including_non_ascii() -> None:
    tasks = [_task("Écrire le rapport"), _task("Lire le rapport"), _task("Appeler Zoé")]
    assert [t.title for t in match_title(tasks, "écrire")] == ["Écrire le rapport"]
    assert [t.title for t in match_title(tasks, "RAPPORT")] == [
        "Écrire le rapport",
        "Lire le rapport",
    ]
    assert match_title(tasks, "dentist") == []


def test_part_of_a_word_never_names_a_task() -> None:
    # "Forget it." once deleted "submit report": "it" is inside "submit".
    tasks = [_task("submit report"), _task("buy milk")]
    assert match_title(tasks, "it") == []
    assert match_title(tasks, "port") == []
    assert [t.title for t in match_title(tasks, "report")] == ["submit report"]


def test_two_tasks_with_the_same_title_are_both_returned_so_the_caller_can_ask() -> None:
    tasks = [_task("Buy milk"), _task("buy milk "), _task("Buy milk and eggs")]
    assert [t.title for t in match_title(tasks, "buy milk")] == ["Buy milk", "buy milk "]
