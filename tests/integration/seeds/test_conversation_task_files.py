"""Conversation task files (seed 000 storage): where a conversation's list lives, what a file
holds, and that no change is lost or half-written, even with two processes writing at once."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

import storage.task_files
from storage.task_files import (
    APPLIED_CALLS_LIMIT,
    TASKS_DIR_ENV,
    CallResult,
    TaskFileCorrupt,
    TaskFiles,
    TaskList,
    task_file_stem,
)

REPO = Path(__file__).resolve().parents[3]


def tasks_folder(base: Path) -> Path:
    return base / ".agents" / "tasks"


def write_file(base: Path, conversation_id: str, content: str | bytes) -> Path:
    path = TaskFiles(base).path(conversation_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    return path


def stored(base: Path, conversation_id: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(TaskFiles(base).path(conversation_id).read_text())
    return document


def add(files: TaskFiles, conversation_id: str, title: str, description: str = "") -> str:
    return files.update(conversation_id, lambda tasks: tasks.add(title, description).id)


# --- where a conversation's list lives -----------------------------------------------------


def test_a_uuid_conversation_is_stored_under_its_32_hex_digits(tmp_path: Path) -> None:
    conversation = uuid.uuid4()
    files = TaskFiles(tmp_path)
    add(files, str(conversation), "Write the report")
    expected = tasks_folder(tmp_path) / f"{conversation.hex}.json"
    assert expected.is_file()
    # The same UUID, however it is written, is the same conversation.
    for spelling in (str(conversation).upper(), conversation.hex, conversation.hex.upper()):
        assert [t.title for t in files.read(spelling).tasks] == ["Write the report"]


HOSTILE_IDS = [
    "../x",
    "../../etc/passwd",
    "/etc/passwd",
    "..",
    ".",
    "a\x00b",
    "\x00",
    "x" * 5000,
    "C:\\Windows\\system32",
    "con",
    "NUL",
    "a/b/../../c",
    "\ud800",
    "~",
    " ",
    "🙂",
]


def test_hostile_conversation_ids_stay_inside_the_tasks_folder(tmp_path: Path) -> None:
    base = tmp_path / "base"
    files = TaskFiles(base)
    for conversation_id in HOSTILE_IDS:
        add(files, conversation_id, "inside")
    folder = tasks_folder(base)
    names = sorted(p.name for p in folder.iterdir() if p.suffix == ".json")
    assert len(names) == len(HOSTILE_IDS)  # one file each, none shared
    for name in names:
        assert re.fullmatch(r"[a-z0-9_~-]{1,80}\.json", name), name
    # Nothing was written anywhere but the tasks folder (and its lock files).
    written = {p for p in tmp_path.rglob("*") if p.is_file()}
    assert all(p.parent == folder for p in written)
    for conversation_id in HOSTILE_IDS:
        assert [t.title for t in files.read(conversation_id).tasks] == ["inside"]


def test_different_conversation_ids_never_share_a_file() -> None:
    conversation = uuid.uuid4()
    ids = [
        *HOSTILE_IDS,
        "a",
        "A",
        "a_b",
        "a b",
        "a/b",
        "a:b",
        "a.b",
        "A_B",
        "conv-1",
        "Conv-1",
        "x" * 64,
        "x" * 65,
        "x" * 5001,
        "a\x00",
        "a\x00\x00",
        str(conversation),  # its other spellings are the same id (tests/unit/storage)
        "+" + conversation.hex[1:],  # uuid.UUID accepts these; they are other strings
        "0123456789abcdef0123456789abcd_f",
    ]
    ids.append(task_file_stem("A"))  # an id spelled like another id's file name
    ids.append(task_file_stem("a b") + "x")
    stems = [task_file_stem(conversation_id) for conversation_id in ids]
    assert len(set(stems)) == len(ids)
    # ... even on a file system that ignores case (macOS, Windows).
    assert len({stem.lower() for stem in stems}) == len(ids)


def test_the_folder_is_the_setting_then_the_working_folder_read_at_each_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = TaskFiles()  # built before the setting changes, as a long-running server does
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(TASKS_DIR_ENV, raising=False)
    add(files, "conv-1", "in the working folder")
    assert (tasks_folder(tmp_path) / "conv-1.json").is_file()

    monkeypatch.setenv(TASKS_DIR_ENV, str(tmp_path / "configured"))
    add(files, "conv-1", "in the configured folder")
    assert [t.title for t in files.read("conv-1").tasks] == ["in the configured folder"]
    assert (tasks_folder(tmp_path / "configured") / "conv-1.json").is_file()

    override = TaskFiles(tmp_path / "override")
    add(override, "conv-1", "in the override")
    assert (tasks_folder(tmp_path / "override") / "conv-1.json").is_file()


# --- what a file holds ---------------------------------------------------------------------


def test_a_conversation_without_a_file_has_an_empty_list_and_reading_creates_nothing(
    tmp_path: Path,
) -> None:
    task_list = TaskFiles(tmp_path).read("conv-1")
    assert task_list.tasks == []
    assert not task_list.exists
    assert list(tmp_path.iterdir()) == []


def test_a_change_that_changes_nothing_creates_no_folder_or_file(tmp_path: Path) -> None:
    found = TaskFiles(tmp_path).update("conv-1", lambda tasks: tasks.remove("1"))
    assert found is None
    assert list(tmp_path.iterdir()) == []


def test_the_file_is_in_the_seed_format(tmp_path: Path) -> None:
    files = TaskFiles(tmp_path)
    add(files, "conv-1", "Implement API", "Add GET /api/items endpoint")
    second = add(files, "conv-1", "Add tests")
    files.update("conv-1", lambda tasks: setattr(tasks.find(second), "done", True))
    assert stored(tmp_path, "conv-1")["tasks"] == [
        {"id": "1", "title": "Implement API", "description": "Add GET /api/items endpoint",
         "done": False},
        {"id": "2", "title": "Add tests", "description": "", "done": True},
    ]  # fmt: skip


def test_fields_written_by_someone_else_are_kept(tmp_path: Path) -> None:
    write_file(
        tmp_path,
        "conv-1",
        json.dumps(
            {
                "sessionTitle": "Refactor",
                "tasks": [
                    {
                        "id": "1",
                        "title": "Plan",
                        "description": "",
                        "done": False,
                        "createdAt": "2026-02-18",
                    }
                ],
                # an escaped lone surrogate is valid JSON and must survive a rewrite as well
                "note": "\ud800",
            }
        ),
    )
    files = TaskFiles(tmp_path)
    add(files, "conv-1", "Build")
    document = stored(tmp_path, "conv-1")
    assert document["sessionTitle"] == "Refactor"
    assert document["note"] == "\ud800"
    assert document["tasks"][0]["createdAt"] == "2026-02-18"
    assert [t.title for t in files.read("conv-1").tasks] == ["Plan", "Build"]


def test_ids_are_short_ordinals_never_reused_after_a_delete(tmp_path: Path) -> None:
    files = TaskFiles(tmp_path)
    assert [add(files, "conv-1", title) for title in ("a", "b", "c")] == ["1", "2", "3"]
    files.update("conv-1", lambda tasks: tasks.remove("3"))
    files.update("conv-1", lambda tasks: tasks.remove("2"))
    assert add(files, "conv-1", "d") == "4"


def test_ids_follow_the_highest_one_in_a_file_written_by_someone_else(tmp_path: Path) -> None:
    task = {"title": "t", "description": "", "done": False}
    write_file(
        tmp_path,
        "conv-1",
        json.dumps({"tasks": [{"id": i, **task} for i in ("1", "7", "3f2a-guid")]}),
    )
    assert add(TaskFiles(tmp_path), "conv-1", "next") == "8"


CORRUPT_FILES = {
    "not JSON": "{tasks: [",
    "empty": "",
    "not an object": "[]",
    "no tasks": '{"items": []}',
    "tasks not a list": '{"tasks": {"1": {}}}',
    "task not an object": '{"tasks": ["buy milk"]}',
    "task without description": '{"tasks": [{"id": "1", "title": "t", "done": false}]}',
    "done not a boolean": '{"tasks": [{"id": "1", "title": "t", "description": "", "done": 0}]}',
    "id not a string": '{"tasks": [{"id": 1, "title": "t", "description": "", "done": false}]}',
    "title not a string": '{"tasks": [{"id": "1", "title": null, "description": "", '
    '"done": false}]}',
    "duplicate ids": '{"tasks": [{"id": "1", "title": "a", "description": "", "done": false}, '
    '{"id": "1", "title": "b", "description": "", "done": false}]}',
    "bad counter": '{"tasks": [], "nextId": "two"}',
    "bad ledger": '{"tasks": [], "appliedCalls": [{"callId": 1}]}',
    "deeply nested": "[" * 100_000 + "]" * 100_000,
}


@pytest.mark.parametrize("content", CORRUPT_FILES.values(), ids=CORRUPT_FILES.keys())
def test_a_corrupt_file_is_reported_and_left_untouched(tmp_path: Path, content: str) -> None:
    path = write_file(tmp_path, "conv-1", content)
    files = TaskFiles(tmp_path)
    with pytest.raises(TaskFileCorrupt):
        files.read("conv-1")
    with pytest.raises(TaskFileCorrupt):
        add(files, "conv-1", "lost?")
    assert path.read_text() == content
    assert [p.name for p in path.parent.iterdir()] == ["conv-1.json"]  # no lock or temp file


def test_a_file_that_is_not_utf8_is_corrupt(tmp_path: Path) -> None:
    write_file(tmp_path, "conv-1", b'{"tasks": [], "x": "\xff"}')
    with pytest.raises(TaskFileCorrupt):
        TaskFiles(tmp_path).read("conv-1")


def test_a_file_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    write_file(tmp_path, "conv-1", b'\xef\xbb\xbf{"tasks": []}')
    assert TaskFiles(tmp_path).read("conv-1").tasks == []


def test_a_title_that_is_not_valid_text_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    with pytest.raises(ValueError, match="surrogate"):
        add(TaskFiles(tmp_path), "conv-1", "\ud800")
    assert list(tmp_path.iterdir()) == []


# --- no half-written file, no lost update --------------------------------------------------


def test_a_failed_write_keeps_the_previous_list_and_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = TaskFiles(tmp_path)
    add(files, "conv-1", "kept")
    before = files.path("conv-1").read_bytes()

    def disk_full(handle: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(storage.task_files.os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        add(files, "conv-1", "lost")
    monkeypatch.undo()
    assert files.path("conv-1").read_bytes() == before
    assert sorted(p.name for p in tasks_folder(tmp_path).iterdir()) == [
        "conv-1.json",
        "conv-1.json.lock",
    ]


CHILD = """
import sys
from storage.task_files import TaskFiles

files = TaskFiles(sys.argv[1])
name = sys.argv[2]
print("ready", flush=True)
sys.stdin.readline()
for n in range(100):
    files.update("conv-shared", lambda tasks: tasks.add(f"{name}-{n}"))
"""


def test_two_processes_adding_100_tasks_each_lose_none(tmp_path: Path) -> None:
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    with ExitStack() as stack:
        children = [
            stack.enter_context(
                subprocess.Popen(
                    [sys.executable, "-c", CHILD, str(tmp_path), name],
                    cwd=REPO,
                    env=environment,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
            for name in ("first", "second")
        ]
        for child in children:  # both are started and waiting before either writes
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.close()
        assert [child.wait(timeout=300) for child in children] == [0, 0]

    tasks = TaskFiles(tmp_path).read("conv-shared").tasks
    assert len(tasks) == 200
    assert sorted(int(task.id) for task in tasks) == list(range(1, 201))
    assert {task.title for task in tasks} == {
        f"{name}-{n}" for name in ("first", "second") for n in range(100)
    }


# --- exactly once --------------------------------------------------------------------------


def test_a_replayed_call_returns_its_recorded_result_and_changes_nothing(
    tmp_path: Path,
) -> None:
    files = TaskFiles(tmp_path)

    def add_milk(tasks: TaskList) -> CallResult:
        return CallResult(tasks.add("milk").id)

    first = files.apply("conv-1", "msg-1/call_1", "AddTask", add_milk)
    again = files.apply("conv-1", "msg-1/call_1", "AddTask", add_milk)
    other = files.apply("conv-1", "msg-2/call_1", "AddTask", add_milk)
    assert (first, again, other) == (CallResult("1"), CallResult("1"), CallResult("2"))
    assert [t.id for t in files.read("conv-1").tasks] == ["1", "2"]


def test_the_file_remembers_only_the_most_recent_calls() -> None:
    task_list = TaskList()
    for n in range(APPLIED_CALLS_LIMIT + 5):
        task_list.apply_once(f"call-{n}", "AddTask", lambda tasks: CallResult(tasks.add("t").id))
    reread = TaskList.from_document(json.loads(json.dumps(task_list.document())))
    assert len(reread.applied_calls) == APPLIED_CALLS_LIMIT
    assert reread.recorded("call-4") is None
    assert reread.recorded("call-5") == CallResult("6")
    assert reread.recorded(f"call-{APPLIED_CALLS_LIMIT + 4}") == CallResult("205")
