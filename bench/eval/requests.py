"""The evaluation's requests, as data: ``bench/eval/requests.json`` or a file of the same form.

A request file is ``{"requests": [...]}``; each request is

```json
{
  "id": "unique-name",
  "kind": "several-item",
  "request": "what the user writes",
  "toolsets": ["personal_tasks"],
  "workers": [],
  "items": 3,
  "setup": {"personal": [{"title": "water the plants", "done": false}], "conversation": []},
  "expect": {
    "personal": {"open": ["water the plants", "buy groceries"], "done": []},
    "conversation": null,
    "answer_mentions": ["water the plants"],
    "cannot_do": false,
    "plan": "any"
  }
}
```

- ``toolsets``: the built-in toolsets the run binds (``agent.context.BUILTIN_TOOLSETS``).
- ``workers``: workers the turn may delegate to (``"tasks"``: ``agent.tools.task_worker``).
  Systems that cannot delegate get the worker's own toolset instead (see ``bench.eval.systems``).
- ``items``: how many things the request asks for (an add, a completion, a listing each count
  one); the report's tokens per completed item divide by it.
- ``setup``: tasks that exist before the turn, personal (in the database) and in the
  conversation's task file; each ``{"title", "done"}``.
- ``expect.personal`` / ``expect.conversation``: the exact open and done titles afterwards
  (null: not checked). A title is a string or a list of accepted spellings; titles compare
  case- and space-insensitively. Nothing else may exist and no title twice.
- ``expect.answer_mentions``: titles the answer must show (each a string or a list of spellings).
- ``expect.cannot_do``: the request cannot be done with the tools: the answer must say so (one
  of ``bench.eval.checks.CANNOT_MARKERS``) and the end state must be the setup's.
- ``expect.plan``: ``"none"`` when a plan is out of place (a trivial request); a system that
  chooses whether to plan fails the check if it made one. ``"any"``: not checked.
- ``expect.task_tools``: ``"none"`` when no task tool may be called in the measured turn (a
  question or small talk gets an answer, not a listing); ``"any"`` (default): not checked.
- ``expect.may_remain``: titles the request itself adds on the way and then changes ("Add
  'plants' and then rename it to 'water the plants'"): left in the end state, they fail the
  state check but are no harm (the user did ask for them). A title the user took back ("Add
  milk. No, don't.") is not one of them.
- ``expect.may_ask``: a turn that asks instead of acting is right too: one that paused on
  ``ask_user``, or whose answer is a question, passes when the measured turn changed nothing
  (from the setup, or the state after the earlier ``turns``) or when its end state is the
  expected one (it did the clear part, then asked); see ``bench.eval.checks``. Without it a
  paused turn fails.

Issue 40's corpus adds, all optional:

- ``class``: the request's class in the report (``"harm"``, ``"pronouns"``, ...); default the
  file's top-level ``"class"``, else ``"README-like"`` (the suite's first requests).
- ``turns``: earlier user messages on the same thread, sent one turn each before ``request``
  (the measured turn), so "it" can point into the previous turn. Their effects count in the
  expected end state; their answers are not checked.
- a file's top-level ``"part"``: ``"tuning"`` (default; rules may be tuned on it) or
  ``"untuned"`` (held out: its author's rules are judged on it unseen); the report shows the
  parts apart.

``load_requests`` validates a file and says exactly what is wrong, so a held-out set written by
hand fails at once, not half-way through a run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent.context import BUILTIN_TOOLSETS

HERE = Path(__file__).parent
DEFAULT_REQUESTS = HERE / "requests.json"
DEFAULT_CORPUS = (
    DEFAULT_REQUESTS,
    HERE / "heldout.json",
    HERE / "corpus.json",
    HERE / "corpus2.json",
    HERE / "untuned.json",
)
"""What ``python -m bench.eval`` runs without ``--requests``: the README-like suite (its own
requests and its first held-out five), issue 40's tuning corpus (``corpus.json``, and
``corpus2.json``: new phrasings per class written to widen the rules, tuning too) and its
untuned part."""
KNOWN_WORKERS = ("tasks",)
PARTS = ("tuning", "untuned")
DEFAULT_CLASS = "README-like"
PlanExpectation = Literal["any", "none"]
ToolsExpectation = Literal["any", "none"]

Title = tuple[str, ...]
"""A title with its accepted spellings (the first is the one shown)."""


class RequestFileError(ValueError):
    """A request file that cannot be used; the message names the request and the field."""


@dataclass(frozen=True)
class SeedTask:
    """A task that exists before the turn."""

    title: str
    done: bool = False


@dataclass(frozen=True)
class ExpectedTasks:
    """The exact titles open and done after the turn."""

    open: tuple[Title, ...] = ()
    done: tuple[Title, ...] = ()


@dataclass(frozen=True)
class Expectation:
    """What a run's end state and answer must show."""

    personal: ExpectedTasks | None = None
    conversation: ExpectedTasks | None = None
    answer_mentions: tuple[Title, ...] = ()
    cannot_do: bool = False
    plan: PlanExpectation = "any"
    task_tools: ToolsExpectation = "any"
    may_ask: bool = False
    may_remain: tuple[Title, ...] = ()


@dataclass(frozen=True)
class EvalRequest:
    """One request of the suite."""

    id: str
    text: str
    kind: str
    items: int
    toolsets: tuple[str, ...] = ("personal_tasks",)
    workers: tuple[str, ...] = ()
    setup_personal: tuple[SeedTask, ...] = ()
    setup_conversation: tuple[SeedTask, ...] = ()
    expect: Expectation = field(default_factory=Expectation)
    turns: tuple[str, ...] = ()
    """Earlier user messages on the same thread, each its own turn, before ``text``."""
    group: str = DEFAULT_CLASS
    """The request's class (``class`` in the file)."""
    part: str = "tuning"


def _fail(where: str, problem: str) -> RequestFileError:
    return RequestFileError(f"{where}: {problem}")


def _keys(where: str, value: Any, allowed: set[str], required: set[str]) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, f"must be an object, got {type(value).__name__}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise _fail(where, f"unknown key(s) {', '.join(unknown)}; allowed: {sorted(allowed)}")
    missing = sorted(required - set(value))
    if missing:
        raise _fail(where, f"missing key(s) {', '.join(missing)}")
    return value


def _text(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _fail(where, f"must be a non-empty string, got {value!r}")
    return value.strip()


def _title(where: str, value: Any) -> Title:
    if isinstance(value, str):
        return (_text(where, value),)
    if isinstance(value, list) and value:
        return tuple(_text(f"{where}[{i}]", v) for i, v in enumerate(value))
    raise _fail(where, f"must be a title or a non-empty list of spellings, got {value!r}")


def _titles(where: str, value: Any) -> tuple[Title, ...]:
    if not isinstance(value, list):
        raise _fail(where, f"must be a list, got {type(value).__name__}")
    return tuple(_title(f"{where}[{i}]", v) for i, v in enumerate(value))


def _names(where: str, value: Any, known: Sequence[str]) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _fail(where, f"must be a list, got {type(value).__name__}")
    for name in value:
        if name not in known:
            raise _fail(where, f"unknown name {name!r}; known: {', '.join(known)}")
    return tuple(dict.fromkeys(value))


def _seeds(where: str, value: Any) -> tuple[SeedTask, ...]:
    if not isinstance(value, list):
        raise _fail(where, f"must be a list, got {type(value).__name__}")
    seeds = []
    for i, raw in enumerate(value):
        item = _keys(f"{where}[{i}]", raw, {"title", "done"}, {"title"})
        done = item.get("done", False)
        if not isinstance(done, bool):
            raise _fail(f"{where}[{i}].done", f"must be true or false, got {done!r}")
        seeds.append(SeedTask(_text(f"{where}[{i}].title", item["title"]), done))
    return tuple(seeds)


def _expected_tasks(where: str, value: Any) -> ExpectedTasks | None:
    if value is None:
        return None
    item = _keys(where, value, {"open", "done"}, {"open", "done"})
    return ExpectedTasks(
        open=_titles(f"{where}.open", item["open"]), done=_titles(f"{where}.done", item["done"])
    )


def _flag(where: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _fail(where, f"must be true or false, got {value!r}")
    return value


def _expectation(where: str, value: Any) -> Expectation:
    allowed = {
        "personal",
        "conversation",
        "answer_mentions",
        "cannot_do",
        "plan",
        "task_tools",
        "may_ask",
        "may_remain",
    }
    item = _keys(where, value, allowed, set())
    cannot_do = _flag(f"{where}.cannot_do", item.get("cannot_do", False))
    plan = item.get("plan", "any")
    if plan not in ("any", "none"):
        raise _fail(f"{where}.plan", f"must be 'any' or 'none', got {plan!r}")
    task_tools = item.get("task_tools", "any")
    if task_tools not in ("any", "none"):
        raise _fail(f"{where}.task_tools", f"must be 'any' or 'none', got {task_tools!r}")
    return Expectation(
        personal=_expected_tasks(f"{where}.personal", item.get("personal")),
        conversation=_expected_tasks(f"{where}.conversation", item.get("conversation")),
        answer_mentions=_titles(f"{where}.answer_mentions", item.get("answer_mentions", [])),
        cannot_do=cannot_do,
        plan=plan,
        task_tools=task_tools,
        may_ask=_flag(f"{where}.may_ask", item.get("may_ask", False)),
        may_remain=_titles(f"{where}.may_remain", item.get("may_remain", [])),
    )


def _turns(where: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _fail(where, f"must be a list of messages, got {type(value).__name__}")
    return tuple(_text(f"{where}[{i}]", turn) for i, turn in enumerate(value))


def parse_request(
    where: str, raw: Any, *, group: str = DEFAULT_CLASS, part: str = "tuning"
) -> EvalRequest:
    """One request from its JSON object; ``where`` names it in errors; ``group`` and ``part``
    are its file's defaults."""
    allowed = {
        "id",
        "kind",
        "class",
        "request",
        "turns",
        "toolsets",
        "workers",
        "items",
        "setup",
        "expect",
    }
    item = _keys(where, raw, allowed, {"id", "kind", "request", "items", "expect"})
    request_id = _text(f"{where}.id", item["id"])
    where = f"request {request_id!r}"
    items = item["items"]
    if not isinstance(items, int) or isinstance(items, bool) or items < 0:
        raise _fail(f"{where}.items", f"must be a whole number >= 0, got {items!r}")
    setup = _keys(f"{where}.setup", item.get("setup", {}), {"personal", "conversation"}, set())
    toolsets = _names(
        f"{where}.toolsets", item.get("toolsets", ["personal_tasks"]), BUILTIN_TOOLSETS
    )
    workers = _names(f"{where}.workers", item.get("workers", []), KNOWN_WORKERS)
    expect = _expectation(f"{where}.expect", item["expect"])
    request = EvalRequest(
        id=request_id,
        text=_text(f"{where}.request", item["request"]),
        kind=_text(f"{where}.kind", item["kind"]),
        items=items,
        toolsets=toolsets,
        workers=workers,
        setup_personal=_seeds(f"{where}.setup.personal", setup.get("personal", [])),
        setup_conversation=_seeds(f"{where}.setup.conversation", setup.get("conversation", [])),
        expect=expect,
        turns=_turns(f"{where}.turns", item.get("turns", [])),
        group=_text(f"{where}.class", item.get("class", group)),
        part=part,
    )
    _check_consistent(where, request)
    return request


def _check_consistent(where: str, request: EvalRequest) -> None:
    """Expectations a run could never meet are the file's error, not the system's."""
    reaches_personal = "personal_tasks" in request.toolsets or "tasks" in request.workers
    if (request.expect.personal is not None or request.setup_personal) and not reaches_personal:
        raise _fail(
            where,
            "personal tasks are set up or expected, but neither the toolset "
            "personal_tasks nor the worker tasks is bound",
        )
    reaches_conversation = "conversation_tasks" in request.toolsets
    if (
        request.expect.conversation is not None or request.setup_conversation
    ) and not reaches_conversation:
        raise _fail(
            where,
            "conversation tasks are set up or expected, but the toolset "
            "conversation_tasks is not bound",
        )


def parse_requests(document: Any, source: str = "request file") -> list[EvalRequest]:
    """Every request of a parsed request file, checked; ids must be unique."""
    top = _keys(source, document, {"requests", "part", "class"}, {"requests"})
    part = top.get("part", "tuning")
    if part not in PARTS:
        raise _fail(f"{source}: part", f"must be one of {', '.join(PARTS)}, got {part!r}")
    group = _text(f"{source}: class", top.get("class", DEFAULT_CLASS))
    raw_requests = top["requests"]
    if not isinstance(raw_requests, list) or not raw_requests:
        raise _fail(source, "'requests' must be a non-empty list")
    requests = [
        parse_request(f"{source}: requests[{i}]", r, group=group, part=part)
        for i, r in enumerate(raw_requests)
    ]
    _unique(source, requests)
    return requests


def _unique(source: str, requests: Sequence[EvalRequest]) -> None:
    seen: set[str] = set()
    for request in requests:
        if request.id in seen:
            raise _fail(source, f"request id {request.id!r} is used twice")
        seen.add(request.id)


def load_requests(path: Path = DEFAULT_REQUESTS) -> list[EvalRequest]:
    """The requests of the file at ``path``, checked (``RequestFileError`` otherwise)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise RequestFileError(f"{path}: cannot be read ({error.strerror or error})") from error
    except json.JSONDecodeError as error:
        raise RequestFileError(f"{path}: not valid JSON ({error})") from error
    return parse_requests(document, str(path))


def load_corpus(paths: Sequence[Path] = DEFAULT_CORPUS) -> list[EvalRequest]:
    """The requests of every file in ``paths``, in order; ids must be unique across them, so
    a run's records name one request each."""
    requests = [request for path in paths for request in load_requests(path)]
    _unique(", ".join(str(path) for path in paths), requests)
    return requests
