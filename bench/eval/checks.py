"""The checks of one run: its end state (the user's tasks in the database, the conversation's
task file) against the request's expectations, and what its answer had to show.

Nothing here reads how the answer is worded beyond two things a user would check by eye: that
it shows the titles the request asked to be shown, and, for a request that cannot be done, that
it says so. Each failed check is one line saying what was expected and what was found.

Harm (issue 40) is counted apart from success, because a turn that fails to act and a turn that
acts wrongly are not equally bad: ``harm_of`` lists every change to the tasks nobody asked for
(a task added, completed, reopened or deleted that the expectations do not name; a rename is
the old title gone and a new one added). A turn may fail without harm (it did too little), and
the report shows both.
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
    paused: bool = False
    """The measured turn ended paused on a question (``ask_user``), ``answer`` being the
    question: the runner records it and does not answer."""
    tool_calls: tuple[str, ...] = ()
    """The names of the tools called in the measured turn, in order (the harness's own
    lookups included)."""
    before_personal: list[TaskState] | None = None
    """The personal tasks when the measured turn began (after the request's earlier
    ``turns``); None: the setup's, as with no earlier turns."""
    before_conversation: list[TaskState] | None = None


TASK_TOOLS = frozenset(
    {
        "add_task",
        "list_tasks",
        "complete_task",
        "update_task",
        "delete_task",
        "AddTask",
        "ListTasks",
        "CompleteTask",
        "UncompleteTask",
        "DeleteTask",
        "delegate",
    }
)
"""The tools that read or change tasks (personal, the conversation's, through the tasks
worker): a question or small talk (``task_tools: "none"``) calls none of them."""


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


def _state_checks(request: EvalRequest, outcome: RunOutcome) -> list[str]:
    expect = request.expect
    failures: list[str] = []
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
    return failures


def _as_expected(seeds: Sequence[SeedTask | TaskState]) -> ExpectedTasks:
    return ExpectedTasks(
        open=tuple((seed.title,) for seed in seeds if not seed.done),
        done=tuple((seed.title,) for seed in seeds if seed.done),
    )


def says_cannot(answer: str) -> bool:
    """Whether ``answer`` says the request could not be done."""
    text = normalised(answer)
    return any(marker in text for marker in CANNOT_MARKERS)


def asks(outcome: RunOutcome) -> bool:
    """Whether the turn asked the user instead of finishing: it paused on ``ask_user``, or its
    answer is a question ("Which task do you mean?")."""
    return outcome.paused or "?" in outcome.answer


def unchanged_by_the_turn(request: EvalRequest, outcome: RunOutcome) -> bool:
    """Whether the measured turn left every task as it found it (the setup, or the state after
    the earlier ``turns``)."""
    stores = (
        (request.setup_personal, outcome.before_personal, outcome.personal),
        (request.setup_conversation, outcome.before_conversation, outcome.conversation),
    )
    return all(
        not _task_checks("", _as_expected(seeds if began is None else began), after)
        for seeds, began, after in stores
    )


def failed_checks(request: EvalRequest, outcome: RunOutcome) -> list[str]:
    """Every check of ``request`` that ``outcome`` fails; empty when the run succeeded.

    A request with ``may_ask`` also passes by asking (``asks``) with nothing changed by the
    turn: it may stop before any part of the request, so the state it began in is as right as
    the expected one ("Add 'x', then complete both": asking before adding 'x' is right, so is
    adding it and then asking). The answer checks are then waived, since a question cannot yet
    show what was asked for. Without ``may_ask`` a turn that paused fails: it did not do what
    the words said without doubt."""
    expect = request.expect
    failures: list[str] = []
    asked = expect.may_ask and asks(outcome)
    if outcome.paused and not expect.may_ask:
        question = " ".join(outcome.answer.split())[:120]
        failures.append(f"the turn paused on a question ({question!r}) where it should have acted")
    if not outcome.answer.strip():
        failures.append("the turn ended without an answer")
    if not (asked and unchanged_by_the_turn(request, outcome)):
        failures.extend(_state_checks(request, outcome))
    answer = normalised(outcome.answer)
    for title in () if asked else expect.answer_mentions:
        if not any(normalised(spelling) in answer for spelling in title):
            failures.append(f"the answer does not show {title[0]!r}")
    if (
        expect.cannot_do
        and not asked
        and outcome.answer.strip()
        and not says_cannot(outcome.answer)
    ):
        failures.append("the answer does not say the request cannot be done")
    if expect.task_tools == "none":
        called = sorted({name for name in outcome.tool_calls if name in TASK_TOOLS})
        if called:
            failures.append(f"called task tool(s) {called} for a request that needs none")
    if expect.plan == "none" and outcome.chooses_plan and outcome.plan_items:
        failures.append(f"made a plan ({outcome.plan_items} items) for a request that needs none")
    return failures


def _unrequested(
    where: str,
    before: Sequence[SeedTask | TaskState],
    expected: ExpectedTasks,
    after: Sequence[TaskState],
    may_remain: Sequence[Title] = (),
) -> list[str]:
    """The changes from ``before`` to ``after`` that ``expected`` does not name.

    Each task before is paired with one after of the same title (preferring the same state)
    and with one expected title; what is left over after is an addition. A task gone that the
    expectation keeps, a state changed other than to the expected one, and an addition no
    expected title accepts are each one change. A task left as it was is never a change, even
    where the expectation wanted it changed: doing too little is a failure, not harm; so is a
    title the request added on the way and should have changed (``may_remain``), left as
    added."""
    wanted = [(title, False) for title in expected.open] + [
        (title, True) for title in expected.done
    ]
    left = list(after)
    changes: list[str] = []

    def take_wanted(title: str, done: bool) -> tuple[Title, bool] | None:
        hits = [w for w in wanted if _matches(w[0], title)]
        hit = next((w for w in hits if w[1] == done), hits[0] if hits else None)
        if hit is not None:
            wanted.remove(hit)
        return hit

    for seed in before:
        same = [task for task in left if normalised(task.title) == normalised(seed.title)]
        now = next((task for task in same if task.done == seed.done), same[0] if same else None)
        want = take_wanted(seed.title, seed.done if now is None else now.done)
        if now is None:
            if want is not None:
                changes.append(f"{where}: deleted {seed.title!r}")
            continue
        left.remove(now)
        if now.done != seed.done and (want is None or want[1] != now.done):
            changes.append(f"{where}: {'completed' if now.done else 'reopened'} {seed.title!r}")
    remaining = list(may_remain)
    for task in left:
        if take_wanted(task.title, task.done) is not None:
            continue
        asked = next((title for title in remaining if _matches(title, task.title)), None)
        if asked is not None:
            remaining.remove(asked)
        else:
            changes.append(f"{where}: added {task.title!r}" + (" (done)" if task.done else ""))
    return changes


def harm_of(request: EvalRequest, outcome: RunOutcome) -> list[str]:
    """Every change the measured turn made to the tasks that nobody asked for: from the state
    it began in (``before_*``, else the setup) to the end state, against the expectation. A
    task an earlier turn added and the measured turn should have removed or renamed is then no
    harm if left alone (the user did ask for it). A task list whose expectation is not given may
    not change at all."""
    expect = request.expect
    changes: list[str] = []
    stores = (
        (
            "personal tasks",
            request.setup_personal,
            outcome.before_personal,
            expect.personal,
            outcome.personal,
        ),
        (
            "conversation tasks",
            request.setup_conversation,
            outcome.before_conversation,
            expect.conversation,
            outcome.conversation,
        ),
    )
    for where, seeds, began, expected, after in stores:
        wanted = expected if expected is not None else _as_expected(seeds)
        before: Sequence[SeedTask | TaskState] = seeds if began is None else began
        changes.extend(_unrequested(where, before, wanted, after, expect.may_remain))
    return changes
