"""Conversation task lists as JSON files (seed 000): one file per conversation, no database.

Layout: ``<base>/.agents/tasks/<name>.json``, where ``<base>`` is ``TURNPLAN_TASKS_DIR`` (else the
working folder) and ``<name>`` comes from the conversation id (``task_file_stem``). The file is
the seed's ``{"tasks": [{"id", "title", "description", "done"}, ...]}``; fields this module does
not know, at the top level or in a task, are kept when it rewrites the file. It adds two of its
own at the top level: ``nextId`` (ids are ordinals, never reused after a delete) and
``appliedCalls`` (the results of the most recent tool calls, for exactly-once replay).

Beyond the seed, a change is never lost or half-seen:

- every write goes to a temporary file in the same folder, is fsync'd, then ``os.replace``d over
  the old one, so a reader sees the old list or the new one, never part of a file;
- writers of one conversation take an exclusive lock on the sidecar ``<name>.json.lock`` (never
  deleted: removing a lock file lets two writers lock different files) around read, change and
  write, so concurrent changes from threads or processes all land.

Everything here blocks (file I/O, locks, even reading the environment and the working folder):
async callers run it in ``asyncio.to_thread``. Errors: ``TaskFileCorrupt`` for a file that is
not a valid task list, ``OSError`` for the disk's own failures; neither leaves a file behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from storage.ids import canonical_uuid

TASKS_DIR_ENV = "TURNPLAN_TASKS_DIR"
"""Folder under which ``.agents/tasks/`` lives; unset or empty means the working folder."""

APPLIED_CALLS_LIMIT = 200
"""How many recent tool-call results a file keeps for replay; older ones are dropped."""

TASK_FIELDS = ("id", "title", "description", "done")
NEXT_ID_FIELD = "nextId"
APPLIED_CALLS_FIELD = "appliedCalls"

T = TypeVar("T")

_PLAIN_ID = re.compile(r"[a-z0-9_-]{1,64}")
_WINDOWS_RESERVED = frozenset(
    {"con", "prn", "aux", "nul"} | {f"{port}{n}" for port in ("com", "lpt") for n in range(1, 10)}
)
_MAX_ORDINAL_DIGITS = 18


class TaskFileCorrupt(Exception):
    """The task file exists but is not a valid task list; the message says why (for the log,
    not for the model)."""


def task_file_stem(conversation_id: str) -> str:
    """The file name (without ``.json``) of a conversation's task list; it never leaves the
    folder, and two different ids never share it, even on a case-insensitive file system.

    - a UUID in any spelling ``storage.ids`` knows (case, hyphens, braces, ``urn:uuid:``): its
      32 lowercase hex digits (the seed's ``ToString("N")``). The ownership check sees the same
      canonical id (``storage.ids.canonical_id``), so a re-spelt id never reaches another
      owner's file;
    - a short id of lowercase letters, digits, ``_`` and ``-`` (not a Windows device name): as is;
    - anything else: a readable lowercase part, ``~``, and 32 hex digits of the id's SHA-256.
      Plain ids cannot contain ``~``, so the three forms never meet.
    """
    uuid_form = canonical_uuid(conversation_id)
    if uuid_form is not None:
        return uuid_form.replace("-", "")
    if _PLAIN_ID.fullmatch(conversation_id) and conversation_id not in _WINDOWS_RESERVED:
        return conversation_id
    # surrogatepass: an id holding a lone surrogate still hashes (and differs from any other).
    digest = hashlib.sha256(conversation_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    readable = re.sub(r"[^a-z0-9_-]+", "_", conversation_id.lower()).strip("_")[:40]
    return f"{readable or 'id'}~{digest}"


def tasks_dir(override: str | Path | None = None) -> Path:
    """``<base>/.agents/tasks``: ``override``, else ``TURNPLAN_TASKS_DIR``, else the working
    folder, read now (so a changed setting applies to the next call)."""
    if override is not None and str(override):
        base = Path(override).expanduser()
    elif os.environ.get(TASKS_DIR_ENV):
        base = Path(os.environ[TASKS_DIR_ENV]).expanduser()
    else:
        base = Path.cwd()
    return base / ".agents" / "tasks"


@dataclass
class TaskEntry:
    """One task of the list; ``extra`` holds fields written by someone else, kept as they are."""

    id: str
    title: str
    description: str
    done: bool
    extra: dict[str, Any] = field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        """The seed's four fields, as the tools return them."""
        return {
            "id": self.id,
            "title": self.title,
            "description": self.description,
            "done": self.done,
        }

    def document(self) -> dict[str, Any]:
        return {**self.public(), **self.extra}


@dataclass(frozen=True)
class CallResult:
    """What a tool call returned: the message content, and whether it was an error."""

    content: str
    is_error: bool = False


@dataclass(frozen=True)
class AppliedCall:
    """A tool call applied to this file, with its result (``call_id`` is the call record id)."""

    call_id: str
    tool: str
    result: CallResult

    def document(self) -> dict[str, Any]:
        return {
            "callId": self.call_id,
            "tool": self.tool,
            "result": self.result.content,
            "isError": self.result.is_error,
        }


@dataclass
class TaskList:
    """A conversation's task list as read from its file (``exists`` False: no file yet)."""

    tasks: list[TaskEntry] = field(default_factory=list)
    next_id: int = 1
    applied_calls: list[AppliedCall] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    exists: bool = False

    def find(self, task_id: str) -> TaskEntry | None:
        return next((task for task in self.tasks if task.id == task_id), None)

    def add(self, title: str, description: str = "") -> TaskEntry:
        """Append a task that is not done, under the next unused ordinal id."""
        for name, text in (("title", title), ("description", description)):
            if not _encodable(text):
                raise ValueError(f"the task {name} is not valid text (an unpaired surrogate)")
        used = {task.id for task in self.tasks}
        ordinals = [int(i) for i in used if _is_ordinal(i)]
        number = max([self.next_id, *(n + 1 for n in ordinals)])
        while str(number) in used:  # a safety net: ids too long to count as ordinals
            number += 1
        task = TaskEntry(id=str(number), title=title, description=description, done=False)
        self.tasks.append(task)
        self.next_id = number + 1
        return task

    def remove(self, task_id: str) -> TaskEntry | None:
        task = self.find(task_id)
        if task is not None:
            self.tasks.remove(task)
        return task

    def recorded(self, call_id: str) -> CallResult | None:
        """The result a call recorded when it was applied, if this file still holds it."""
        if not call_id:
            return None
        return next((c.result for c in self.applied_calls if c.call_id == call_id), None)

    def apply_once(
        self,
        call_id: str,
        tool: str,
        action: Callable[[TaskList], CallResult],
        keep: int = APPLIED_CALLS_LIMIT,
    ) -> CallResult:
        """Run ``action`` for tool call ``call_id`` unless this file already recorded it (then
        return the recorded result and change nothing), and record its result with its effect.

        A call that changes no task on a list that has no file yet records nothing: no file is
        created for it (an empty ``call_id``, for calls outside a tools node, records nothing).
        """
        recorded = self.recorded(call_id)
        if recorded is not None:
            return recorded
        before = [task.document() for task in self.tasks]
        result = action(self)
        changed = [task.document() for task in self.tasks] != before
        if call_id and (self.exists or changed):
            self.applied_calls = [*self.applied_calls, AppliedCall(call_id, tool, result)][-keep:]
        return result

    def document(self) -> dict[str, Any]:
        """The file's JSON: the seed's ``tasks`` first, then every other top-level field."""
        document: dict[str, Any] = {"tasks": [task.document() for task in self.tasks]}
        document.update(self.extra)
        document[NEXT_ID_FIELD] = self.next_id
        document[APPLIED_CALLS_FIELD] = [call.document() for call in self.applied_calls]
        return document

    @classmethod
    def from_document(cls, document: Any) -> TaskList:
        """Parse a file's JSON; anything that is not a valid task list is ``TaskFileCorrupt``."""
        if not isinstance(document, dict):
            raise TaskFileCorrupt("the top level is not a JSON object")
        raw_tasks = document.get("tasks")
        if not isinstance(raw_tasks, list):
            raise TaskFileCorrupt("`tasks` is missing or not a list")
        tasks = [_parse_task(index, raw) for index, raw in enumerate(raw_tasks)]
        ids = [task.id for task in tasks]
        if len(set(ids)) != len(ids):
            raise TaskFileCorrupt("two tasks share an id")
        extra = {
            key: value
            for key, value in document.items()
            if key not in {"tasks", NEXT_ID_FIELD, APPLIED_CALLS_FIELD}
        }
        return cls(
            tasks=tasks,
            next_id=_parse_next_id(document.get(NEXT_ID_FIELD, 1)),
            applied_calls=_parse_applied_calls(document.get(APPLIED_CALLS_FIELD, [])),
            extra=extra,
            exists=True,
        )


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_ordinal(task_id: str) -> bool:
    return task_id.isascii() and task_id.isdigit() and len(task_id) <= _MAX_ORDINAL_DIGITS


def _parse_task(index: int, raw: Any) -> TaskEntry:
    where = f"task {index + 1}"
    if not isinstance(raw, dict):
        raise TaskFileCorrupt(f"{where} is not a JSON object")
    for name, kind in (("id", str), ("title", str), ("description", str), ("done", bool)):
        if name not in raw:
            raise TaskFileCorrupt(f"{where} has no `{name}`")
        if not isinstance(raw[name], kind):
            raise TaskFileCorrupt(f"{where}: `{name}` is not a {kind.__name__}")
    if not raw["id"]:
        raise TaskFileCorrupt(f"{where} has an empty `id`")
    return TaskEntry(
        id=raw["id"],
        title=raw["title"],
        description=raw["description"],
        done=raw["done"],
        extra={key: value for key, value in raw.items() if key not in TASK_FIELDS},
    )


def _parse_next_id(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TaskFileCorrupt(f"`{NEXT_ID_FIELD}` is not a positive integer")
    return value


def _parse_applied_calls(value: Any) -> list[AppliedCall]:
    if not isinstance(value, list):
        raise TaskFileCorrupt(f"`{APPLIED_CALLS_FIELD}` is not a list")
    calls = []
    for raw in value:
        if not (
            isinstance(raw, dict)
            and isinstance(raw.get("callId"), str)
            and isinstance(raw.get("tool"), str)
            and isinstance(raw.get("result"), str)
            and isinstance(raw.get("isError"), bool)
        ):
            raise TaskFileCorrupt(f"an entry of `{APPLIED_CALLS_FIELD}` is malformed")
        result = CallResult(raw["result"], raw["isError"])
        calls.append(AppliedCall(raw["callId"], raw["tool"], result))
    return calls


def read_task_list(path: Path) -> TaskList:
    """The list in ``path``; an empty one (``exists`` False) when there is no file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return TaskList()
    try:
        # utf-8-sig: a file saved by a Windows editor may start with a byte-order mark.
        document = json.loads(data.decode("utf-8-sig"))
    except (ValueError, RecursionError) as error:  # bad UTF-8, bad JSON, absurd nesting
        raise TaskFileCorrupt(f"{path} is not valid JSON: {error}") from error
    try:
        return TaskList.from_document(document)
    except TaskFileCorrupt as error:
        raise TaskFileCorrupt(f"{path}: {error}") from error


def _encode(document: dict[str, Any]) -> bytes:
    try:
        return json.dumps(document, ensure_ascii=False, indent=2).encode("utf-8")
    except UnicodeEncodeError:
        # The file already held an escaped lone surrogate (in a field we keep as is): escaping
        # every non-ASCII character writes it back unchanged.
        return json.dumps(document, ensure_ascii=True, indent=2).encode("ascii")


def _write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers see the old file or the new one."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    """Make the rename itself durable (POSIX); best effort, as some file systems refuse."""
    if sys.platform == "win32":
        return
    with contextlib.suppress(OSError):
        handle = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)


if sys.platform == "win32":
    import errno
    import msvcrt

    def _lock(handle: int) -> None:
        while True:  # LK_LOCK gives up after about 10 seconds; a writer waits its turn
            try:
                msvcrt.locking(handle, msvcrt.LK_LOCK, 1)
                return
            except OSError as error:
                if error.errno != errno.EDEADLOCK:
                    raise

    def _unlock(handle: int) -> None:
        os.lseek(handle, 0, os.SEEK_SET)
        msvcrt.locking(handle, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _lock(handle: int) -> None:
        fcntl.flock(handle, fcntl.LOCK_EX)

    def _unlock(handle: int) -> None:
        fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of ``path``'s task list (``<name>.json.lock`` beside it).

    Each call opens the lock file afresh, so threads of one process exclude each other as
    processes do (``flock`` locks belong to the open file, not to the process).
    """
    handle = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        _lock(handle)
        try:
            yield
        finally:
            _unlock(handle)
    finally:
        os.close(handle)


class TaskFiles:
    """The task files under one base folder (``None``: ``TURNPLAN_TASKS_DIR`` or the working
    folder, read at each call). Every method blocks; call it from a worker thread."""

    def __init__(self, base_dir: str | Path | None = None) -> None:
        self._base_dir = base_dir

    def path(self, conversation_id: str) -> Path:
        return tasks_dir(self._base_dir) / f"{task_file_stem(conversation_id)}.json"

    def read(self, conversation_id: str) -> TaskList:
        """The conversation's list as it is now (no lock: a replaced file is never partial)."""
        return read_task_list(self.path(conversation_id))

    def update(self, conversation_id: str, change: Callable[[TaskList], T]) -> T:
        """Apply ``change`` to the conversation's list and save it, as one step no other writer
        can interleave with; return what ``change`` returned.

        ``change`` may run twice (it must only act on the list it is given): first on an
        unlocked read, so that a change that changes nothing (a replayed call, a missing task
        with no file yet) creates no folder, lock file or file; then, if it changes something,
        again under the lock on a fresh read, whose result is saved.
        """
        path = self.path(conversation_id)
        draft = read_task_list(path)
        before = draft.document()
        result = change(draft)
        after = draft.document()
        if after == before:
            return result
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(path):
            current = read_task_list(path)
            before = current.document()
            result = change(current)
            after = current.document()
            if after != before:
                _write_atomically(path, _encode(after))
        return result

    def apply(
        self,
        conversation_id: str,
        call_id: str,
        tool: str,
        action: Callable[[TaskList], CallResult],
    ) -> CallResult:
        """``update`` for one tool call, applied at most once (see ``TaskList.apply_once``)."""
        return self.update(conversation_id, lambda tasks: tasks.apply_once(call_id, tool, action))
