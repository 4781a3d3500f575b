"""The canonical form of owned ids (``storage.ids``): every spelling of a UUID is one id, in
the conversation a run acts on and in the task file it names; other ids stay as sent."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from agent.turn.identity import conversation_id_of
from storage.ids import canonical_id
from storage.task_files import TaskFiles

ID = uuid.UUID("6f1c2b3a-4d5e-4f60-8a9b-0c1d2e3f4a5b")
CANONICAL = str(ID)
SPELLINGS = [
    CANONICAL,
    CANONICAL.upper(),
    ID.hex,
    ID.hex.upper(),
    "{" + CANONICAL + "}",
    "{" + ID.hex.upper() + "}",
    "urn:uuid:" + CANONICAL,
    "URN:UUID:" + CANONICAL.upper(),
]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_spelling_of_a_uuid_is_the_lower_case_hyphenated_id(spelling: str) -> None:
    assert canonical_id(spelling) == CANONICAL


@pytest.mark.parametrize(
    "other",
    [
        "conv-1",
        "Conv-1",
        CANONICAL + " ",  # not a spelling: an id of its own
        "{" + CANONICAL,
        "+" + ID.hex[1:],  # uuid.UUID reads this as a UUID; it is another string
        ID.hex[:-1] + "_",
        ID.hex[:30] + "_" + ID.hex[30:],  # uuid.UUID ignores the underscore
        "urn:uuid:{" + CANONICAL + "}",
        "",
    ],
)
def test_an_id_that_is_not_a_uuid_spelling_stays_as_it_was_sent(other: str) -> None:
    assert canonical_id(other) == other


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_run_naming_a_conversation_in_any_spelling_acts_on_its_canonical_id(
    spelling: str,
) -> None:
    assert conversation_id_of(spelling, None) == CANONICAL
    assert conversation_id_of(None, {"configurable": {"thread_id": spelling}}) == CANONICAL
    assert conversation_id_of(None, None, previous=spelling) == CANONICAL


def test_every_spelling_of_a_conversation_opens_the_same_task_file(tmp_path: Path) -> None:
    files = TaskFiles(tmp_path)
    files.update(CANONICAL, lambda tasks: tasks.add("written under the canonical id"))
    for spelling in SPELLINGS:
        assert files.path(spelling) == files.path(CANONICAL), spelling
        assert [task.title for task in files.read(spelling).tasks] == [
            "written under the canonical id"
        ]
    assert files.path("conv-1") != files.path("Conv-1")
