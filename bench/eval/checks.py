"""The checks of one run: its end state (the user's tasks in the database, the conversation's
task file) against the request's expectations, and what its answer had to show.

Nothing here reads how the answer is worded beyond two things a user would check by eye: that
it shows the titles the request asked to be shown, and, for a request that cannot be done, that
it says so. Each failed check is one line saying what was expected and what was found.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.eval.requests import EvalRequest, ExpectedTasks, SeedTask, Title

CANNOT_MARKERS = (
    "can't",
    "cannot",
    "can not",
    "unable",
    "not able",
    "don't have",
    "do not have",
    "doesn't have",
    "does not have",
    "not possible",
    "isn't possible",
    "no tool",
    "not supported",
    "isn't supported",
    "don't support",
    "doesn't support",
    "does not support",
    "not available",
    "couldn't",
    "could not",
    "no task",
    "not find",
    "wasn't found",
    "not found",
    "doesn't exist",
    "does not exist",
    "there is no",
    "there's no",
)
"""Phrases by which an answer says the request could not be done (compared on normalised
text: lower case, straight apostrophes)."""


@dataclass(frozen=True)
class TaskState:
    """One task as it exists after the turn."""

    title: str
    done: bool


@dataclass
class RunOutcome:
    """What a run left behind, read after the turn from the database and the task file."""

    answer: str
    personal: list[TaskState] = field(default_factory=list)
    conversation: list[TaskState] = field(default_factory=list)
    plan_items: int = 0
    """Plan rows (turnplan) or todos written (todolist) in the turn."""
    chooses_plan: bool = True
    """Whether the system decides itself whether to plan (``planning`` auto, todolist): only
    then is a plan made for a trivial request its fault."""
    turn_status: str = ""
    """turnplan's ``turnStatus`` (empty for todolist)."""
    audit_calls: int = 0
    """Calls of the audit model (``turnplan-audit``), counted apart by turnplan."""
    audit_tokens: int = 0


def normalised(text: str) -> str:
    """Text as titles are compared: lower case, straight quotes, single spaces, no surrounding
    quotes or final full stop."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"')
    text = text.replace("\u201d", '"').casefold()
    text = " ".join(text.split()).strip(" \"'`")
    return text.rstrip(".").strip()


def _matches(title: Title, actual: str) -> bool:
    return normalised(actual) in {normalised(spelling) for spelling in title}


def _shown(titles: Sequence[Title]) -> list[str]:
    return [title[0] for title in titles]


def _task_checks(where: str, expected: ExpectedTasks, actual: Sequence[TaskState]) -> list[str]:
    failures: list[str] = []
    counts = Counter(normalised(task.title) for task in actual)
    duplicates = sorted(title for title, count in counts.items() if count > 1)
    if duplicates:
        failures.append(f"{where}: duplicate titles {duplicates}")
    for state, wanted in (("open", expected.open), ("done", expected.done)):
        found = [task.title for task in actual if task.done == (state == "done")]
        unmatched = list(found)
        missing = []
        for title in wanted:
            hit = next((name for name in unmatched if _matches(title, name)), None)
            if hit is None:
                missing.append(title[0])
            else:
                unmatched.remove(hit)
        if missing or unmatched:
            failures.append(
                f"{where} {state}: expected {_shown(wanted)}, found {sorted(found)}"
                + (f" (missing {missing})" if missing else "")
                + (f" (unexpected {sorted(unmatched)})" if unmatched else "")
            )
    return failures


def _as_expected(seeds: Sequence[SeedTask]) -> ExpectedTasks:
    return ExpectedTasks(
        open=tuple((seed.title,) for seed in seeds if not seed.done),
        done=tuple((seed.title,) for seed in seeds if seed.done),
    )


def says_cannot(answer: str) -> bool:
    """Whether ``answer`` says the request could not be done."""
    text = normalised(answer)
    return any(marker in text for marker in CANNOT_MARKERS)


def failed_checks(request: EvalRequest, outcome: RunOutcome) -> list[str]:
    """Every check of ``request`` that ``outcome`` fails; empty when the run succeeded."""
    expect = request.expect
    failures: list[str] = []
    if not outcome.answer.strip():
        failures.append("the turn ended without an answer")
    personal = expect.personal
    if personal is None and expect.cannot_do:
        personal = _as_expected(request.setup_personal)
    if personal is not None:
        failures.extend(_task_checks("personal tasks", personal, outcome.personal))
    conversation = expect.conversation
    if conversation is None and expect.cannot_do and request.setup_conversation:
        conversation = _as_expected(request.setup_conversation)
    if conversation is not None:
        failures.extend(_task_checks("conversation tasks", conversation, outcome.conversation))
    answer = normalised(outcome.answer)
    for title in expect.answer_mentions:
        if not any(normalised(spelling) in answer for spelling in title):
            failures.append(f"the answer does not show {title[0]!r}")
    if expect.cannot_do and outcome.answer.strip() and not says_cannot(outcome.answer):
        failures.append("the answer does not say the request cannot be done")
    if expect.plan == "none" and outcome.chooses_plan and outcome.plan_items:
        failures.append(f"made a plan ({outcome.plan_items} items) for a request that needs none")
    return failures
