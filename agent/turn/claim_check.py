"""An answer may not end a turn ``answered`` on a change that nothing made (issue 40 §3, §4).

Why: the full prompt profile lets the model answer in its own words, and a weak model claims
what it never did. Measured on the packaged Qwen2.5-Coder 1.5B (bench/RESULTS.md): 11 of 13
turns ended ``answered``, 10 of them with nothing done, such as "I've renamed 'call grandma' to
'call grandma on Sunday'." with no tool called. The answer audit (``agent.calls.answer_audit``)
needs a second model; this check needs none and does not guess: it reads what the harness saw
happen and the answer's own words, never the request's meaning.

- **A claim with nothing behind it.** The answer, or the outcome of a row closed as completed,
  states a change as done ("I've added", "'x' has been renamed", "Deleted 'y'.") or promises
  one ("I'll create the tasks for you": the turn ends here, so it will not be done), with the
  verbs of the task tools (``claimed_changes``; never "I have not added", "you completed",
  "Would you like me to add"), and no tool that can change anything returned a result without
  an error in this turn.
- **An attempt left as it was.** A call of a tool that can change something failed and no
  call of that tool succeeded in the turn; or the model called a tool the run does not have,
  or its answer holds a call written as text (never run), and no call changed anything. A call
  written as text earlier is no attempt when the model, asked to make it or to answer in plain
  words (``agent.turn.empty_answer``), answered. A call the harness held
  back (``NOT_RUN``: a plan not yet approved, a fork) is no attempt: the rows say what is left.
  What a failed attempt was for was not done, whatever the answer says. A call of the same tool
  that succeeded makes a failure good, except for a plan row closed as completed whose own
  calls (``todo_evidence``: those made while it was in progress) all failed: another row's
  success is not this row's (``rows_done_on_failure``; the turn's evidence is read only when
  a change failed, ``needs_row_evidence``).

Either way the turn ends ``incomplete`` and the answer gets, after the model's words, what was
not done and why (``prompts/claim_not_backed.md``, ``prompts/change_failed.md``). The direction
of error is chosen: a change made in an earlier turn and claimed again reads as not done (a
false downgrade says too little; a false ``answered`` says what is untrue); a change the model
made and then words with another verb passes (any change backs any claim: the check never
decides which tool does what the words say).

Which tools change nothing: the plan tools (their rows are the turn's bookkeeping, not the
user's data), ``ask_user``, and the built-in listings (``READ_ONLY_TOOLS``). Any other tool, the
caller's own and MCP tools included, may change something, so its successful call backs a
claim. One core for both faces: ``agent.turn.drain_rule.ended`` calls ``backed_or_restated``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from agent.errors import ErrorCode, error_code_of
from agent.tool_names import ASK_USER, CONTINUE_OPEN_TODOS, TODO_TOOL_NAMES
from agent.turn.identity import REMINDER_NAME, message_text
from prompts import Prompts, chosen
from storage.models import TodoEvidence, TurnTodo

READ_ONLY_TOOLS = frozenset({"list_tasks", "ListTasks"})
"""The built-in tools that only read (the personal tasks' and the conversation list's)."""

CHANGE_NOTHING = TODO_TOOL_NAMES | {CONTINUE_OPEN_TODOS, ASK_USER} | READ_ONLY_TOOLS
"""Tools whose successful calls change none of the user's data."""

_PARTICIPLES = {
    "add": "added", "create": "created", "rename": "renamed", "update": "updated",
    "change": "changed", "edit": "edited", "delete": "deleted", "remove": "removed",
    "mark": "marked", "complete": "completed", "check off": "checked off",
    "tick off": "ticked off", "cross off": "crossed off", "reopen": "reopened", "move": "moved",
    "save": "saved", "schedule": "scheduled", "cancel": "cancelled",
}  # fmt: skip
_DONE = "|".join([*_PARTICIPLES.values(), "canceled"])
_TO_DO = "|".join(_PARTICIPLES)
_TASK_DONE = (
    "added|created|renamed|updated|deleted|removed|marked|completed|reopened|"
    "checked off|ticked off|crossed off"
)
"""The participles a passive claim is read with: those of the task tools only, since "the
meeting was moved" or "has been cancelled" may repeat what the user said of the world."""
_ADVERBS = r"(?:(?:successfully|now|also|just|already|finally|gone ahead and|went ahead and)\s+)*"
_CLAIMS = (
    # "I've added", "We have now renamed"
    rf"\b(?:I|we)(?:'ve|\s+have|\s+had)?\s+{_ADVERBS}(?P<done>{_DONE})\b",
    # "'x' has been deleted", "were successfully added", "was added to your tasks"
    rf"\b(?:has|have|was|were)\s+(?:now\s+|also\s+)?been\s+{_ADVERBS}(?P<done>{_TASK_DONE})\b",
    rf"\b(?:was|were)\s+{_ADVERBS}(?P<done>{_TASK_DONE})\s+(?:to|from|as|in)\b",
    # "Added 'buy milk'.": a sentence that starts with the participle and names a title
    rf"(?:^|[.!:]\s+|\n)\s*(?:[-*•]\s*)?(?:successfully\s+)?(?P<done>{_DONE})\s+['\"\u201c\u2018`]",
    # "I'll create the tasks for you": a promise in a final answer is a change not made
    rf"\b(?:I'll|I\s+will|I'm\s+going\s+to|I\s+am\s+going\s+to|let\s+me)\s+{_ADVERBS}"
    rf"(?P<to_do>{_TO_DO})\b",
)
_NOTHING = r"(?!\s+(?:nothing|none|no\b|not\b|anything))"
"""Not a claim when the verb's object is nothing: "I changed nothing"."""
_CLAIM = [re.compile(pattern + _NOTHING, re.IGNORECASE) for pattern in _CLAIMS]


def claimed_changes(text: str) -> list[str]:
    """The changes ``text`` states as done or promises (participles, lower case, each once, in
    order of pattern): "I've added", "'x' has been renamed", "Deleted 'y'.", "I'll create the
    tasks"; never "I have not added", "you completed", "Would you like me to add": empty when
    it claims none."""
    verbs: list[str] = []
    for pattern in _CLAIM:
        for match in pattern.finditer(text):
            found = match.groupdict()
            verb = found.get("done") or _PARTICIPLES[" ".join(found["to_do"].lower().split())]
            verb = verb.lower().replace("canceled", "cancelled")
            if verb not in verbs:
                verbs.append(verb)
    return verbs


_WRITTEN_CALLS = (
    re.compile(r'<tool_call>\s*(?:```(?:json)?\s*)?\{\s*"name"\s*:\s*"(?P<tool>[^"]{1,80})"'),
    re.compile(r'\{\s*"name"\s*:\s*"(?P<tool>[^"]{1,80})"\s*,\s*"(?:arguments|parameters)"'),
    re.compile(r"<tools>\s*<(?!tool_call\b)(?P<tool>[A-Za-z_][\w-]{0,79})"),
)
"""The tool named by a call the model wrote as text (``<tool_call>{"name": ...``, a bare
``{"name": ..., "arguments": ...}``, ``<tools><create_todo items=...``): the forms
``agent.turn.empty_answer`` reads as a written call, found anywhere in the text."""

NO_SUCH_TOOL = ("There is no tool ", " is not a valid tool")
"""How a call of a tool the run does not have is refused: by the graph's tools step
(``agent.nodes.tools_node``), and by LangGraph's ``ToolNode`` (under ``create_agent``)."""


@dataclass(frozen=True)
class Attempt:
    """A call that did not do what it was for: the tool's name, why, and whether any change
    makes it good (``loose``: a tool that does not exist, or a call written as text, which the
    model may have meant as a tool it called for real)."""

    tool: str
    reason: str
    loose: bool = False


@dataclass
class TurnCalls:
    """What this turn's tool calls did, from their results (``turn_calls``)."""

    called: list[str] = field(default_factory=list)
    """Every tool that returned a result, in order."""
    succeeded: list[str] = field(default_factory=list)
    """Every tool that returned a result without an error, in order."""
    attempts: list[Attempt] = field(default_factory=list)
    """Failed calls of tools that may change something, and calls written as text."""

    @property
    def changed(self) -> list[str]:
        """The tools that may change something and returned a result without an error."""
        return [tool for tool in self.succeeded if tool not in CHANGE_NOTHING]

    @property
    def open_attempts(self) -> list[Attempt]:
        """The attempts nothing in the turn made good: a failed tool that never succeeded in
        it (one success of a tool covers its other calls: a stray second call is no failure
        of the request), a loose attempt with no change at all."""
        return [
            attempt
            for attempt in self.attempts
            if attempt.tool not in self.succeeded and not (attempt.loose and self.changed)
        ]


def _turn_messages(messages: Sequence[AnyMessage]) -> Sequence[AnyMessage]:
    """The messages from the newest one the user wrote (the turn's request) on."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage) and message.name != REMINDER_NAME:
            return messages[index:]
    return messages


def _failed(message: ToolMessage) -> bool:
    return message.status == "error" or error_code_of(message.content) is not None


def _reason(message: ToolMessage) -> str:
    return _reason_text(message_text(message))


def _reason_text(text: str) -> str:
    text = text.strip()
    code = error_code_of(text)
    if code is not None:
        payload = json.loads(text)
        text = f"{code.value}: {payload.get('message') or ''}".strip()
    first = text.splitlines()[0] if text else "failed"
    return first if len(first) <= 200 else first[:199] + "…"


def _written_attempts(message: AIMessage) -> list[Attempt]:
    text = message_text(message)
    names = dict.fromkeys(m["tool"] for form in _WRITTEN_CALLS for m in form.finditer(text))
    return [
        Attempt(name, "written as text, so never run", loose=True)
        for name in names
        if name not in READ_ONLY_TOOLS | {ASK_USER, "list_todo"}
    ]


def turn_calls(messages: Sequence[AnyMessage]) -> TurnCalls:
    """This turn's (from its request on) tool calls, sorted into ``TurnCalls``."""
    names: dict[str, str] = {}
    calls = TurnCalls()
    for message in _turn_messages(messages):
        if isinstance(message, AIMessage):
            names.update({str(call.get("id")): call["name"] for call in message.tool_calls})
        elif isinstance(message, ToolMessage):
            tool = names.get(message.tool_call_id) or message.name or "a tool"
            calls.called.append(tool)
            if not _failed(message):
                calls.succeeded.append(tool)
            elif tool not in CHANGE_NOTHING and error_code_of(message.content) != ErrorCode.NOT_RUN:
                loose = any(marker in message_text(message) for marker in NO_SUCH_TOOL)
                calls.attempts.append(Attempt(tool, _reason(message), loose))
    return calls


def needs_row_evidence(messages: Sequence[AnyMessage]) -> bool:
    """Whether a change failed in this turn that another call of its tool may seem to have
    made good: only then can a row closed as completed rest on failures alone
    (``rows_done_on_failure``), so only then do the callers read the turn's evidence."""
    return bool(turn_calls(messages).attempts)


def rows_done_on_failure(
    rows: Sequence[TurnTodo], evidence: Sequence[TodoEvidence]
) -> list[Attempt]:
    """The failed calls behind rows closed as completed whose every call of a tool that may
    change something failed while they were in progress (``todo_evidence``): a row is no more
    done than its own calls made it, whatever another row's success of the same tool did."""
    completed = {row.id: row for row in rows if row.status == "completed"}
    failed: dict[str, list[TodoEvidence]] = {}
    succeeded: set[str] = set()
    for entry in evidence:
        if entry.todoId not in completed or entry.toolName in CHANGE_NOTHING:
            continue
        if not entry.isError:
            succeeded.add(entry.todoId)
        elif error_code_of(entry.result) != ErrorCode.NOT_RUN:
            failed.setdefault(entry.todoId, []).append(entry)
    return [
        Attempt(
            entry.toolName,
            f"for '{completed[todo_id].title}', closed as completed: {_reason_text(entry.result)}",
        )
        for todo_id, entries in failed.items()
        if todo_id not in succeeded
        for entry in entries
    ]


def _why_nothing_changed(calls: TurnCalls) -> str:
    if not calls.called:
        return "no tool was called"
    read = ", ".join(dict.fromkeys(calls.called))
    return f"the only tools called change nothing ({read})"


def _claims(answer: AIMessage, rows: Sequence[TurnTodo]) -> list[str]:
    """The changes the answer and the completed rows' outcomes claim; "cancelled" is what
    happened to the turn's own rows when one was cancelled (a rejected plan, say)."""
    verbs = claimed_changes(message_text(answer))
    for row in rows:
        if row.status == "completed":
            verbs += [verb for verb in claimed_changes(row.outcome or "") if verb not in verbs]
    if any(row.status == "cancelled" for row in rows):
        verbs = [verb for verb in verbs if verb != "cancelled"]
    return verbs


def _or_list(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def unbacked_statement(
    messages: Sequence[AnyMessage],
    answer: AIMessage,
    rows: Sequence[TurnTodo],
    prompts: Prompts | None = None,
    evidence: Sequence[TodoEvidence] = (),
) -> str | None:
    """What was not done and why, in plain words, when the turn may not end ``answered``
    (the module's two rules); None when the answer is backed. ``evidence``: the turn's, read
    when ``needs_row_evidence`` says a row may rest on failures alone."""
    calls = turn_calls(messages)
    if not answer.tool_calls:
        calls.attempts += _written_attempts(answer)
    if attempts := calls.open_attempts or rows_done_on_failure(rows, evidence):
        lines = "\n".join(dict.fromkeys(f"- {call.tool}: {call.reason}" for call in attempts))
        return chosen(prompts).render("change_failed", failed=lines)
    if calls.changed:
        return None
    verbs = _claims(answer, rows)
    if not verbs:
        return None
    return chosen(prompts).render(
        "claim_not_backed", verbs=_or_list(verbs), why=_why_nothing_changed(calls)
    )


def backed_or_restated(
    messages: Sequence[AnyMessage],
    answer: AIMessage,
    rows: Sequence[TurnTodo],
    prompts: Prompts | None = None,
    evidence: Sequence[TodoEvidence] = (),
) -> AIMessage | None:
    """None when the answer may end the turn ``answered``; else the answer restated (same id:
    it replaces the model's) with what was not done said first, for an ``incomplete`` end."""
    statement = unbacked_statement(messages, answer, rows, prompts, evidence)
    if statement is None:
        return None
    content = chosen(prompts).render(
        "answer_not_backed", statement=statement, answer=message_text(answer).strip()
    )
    return answer.model_copy(update={"content": content})
