"""The compact profile's plan: which tool does each step of the request, and the rows it makes.

A small model is not asked to write a plan (``agent.prompting.request_steps`` says why): the
request's steps get their tools from the verbs each tool declares
(``agent.prompting.compact_verbs``), the model chooses only for steps no verb decides
and tools that declare none, and each step given a tool becomes one ``create_todo`` item whose
title is the user's words and whose ``context`` holds the planned action as typed fields
(``PlannedAction``, JSON), so the act step knows its tool and its target from the database row.
The binding of each call is ``agent.prompting.compact_tools``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import TypeAdapter, ValidationError

from agent.prompting.compact_lookup import content_stems
from agent.prompting.compact_verbs import (
    COMPACT_METADATA,
    CompactTool,
    named_entry,
    tool_entry,
)
from agent.prompting.request_steps import (
    MAX_PHRASE,
    QUOTED,
    RequestStep,
    core_phrase,
    hesitates,
    is_remark,
    negated,
    referents_wanted,
    refers_back,
    retraction,
    sets_a_condition,
    verb_at_start,
    waits_for_something,
)
from agent.tool_names import CONTINUE_OPEN_TODOS, WORKER_TOOLS_METADATA
from storage.models import TurnTodo

PLAN_TOOL = "plan_steps"
"""The compact plan's one function: for each step of the request, the tool that does it."""

NOT_AN_ACTION = "none"

NO_TOOL_OUTCOME = "no tool of mine does what this asks"

PLANNED_KEY = "plannedAction"
"""The one key of a row ``context`` that holds a planned action (``PlannedAction.as_context``)."""


@dataclass(frozen=True)
class PlannedAction:
    """What the compact plan decided for a row: which tool does it, on which of the user's
    words, and the words of the clause it came from. Kept as typed fields in the row's
    ``context`` (``{"plannedAction": {"tool": "add_task", "target": "buy groceries", "clause":
    "add 'buy groceries' to my tasks"}}``), so it is in the database with the row, readable in
    ``list_todo``, and read back by validation, never by parsing a sentence."""

    tool: str
    target: str
    clause: str

    @property
    def clause_quotes(self) -> list[str]:
        return [
            next(g for g in match.groups() if g).strip() for match in QUOTED.finditer(self.clause)
        ]

    def as_context(self) -> str:
        return json.dumps({PLANNED_KEY: asdict(self)}, ensure_ascii=False)


@dataclass(frozen=True)
class _StoredContext:
    plannedAction: PlannedAction


_STORED = TypeAdapter(_StoredContext)


def stored_action(context: str | None) -> PlannedAction | None:
    """The planned action a row ``context`` holds (``PlannedAction.as_context``), else None:
    any other text is the model's or the user's, and never an action."""
    text = (context or "").strip()
    if not text.startswith("{"):
        return None
    try:
        return _STORED.validate_json(text, strict=True).plannedAction
    except ValidationError:
        return None


def planned_action(row: TurnTodo) -> PlannedAction | None:
    """The row's planned action, if the compact plan made it."""
    return stored_action(row.context)


def agent_type(tool: BaseTool) -> str | None:
    """The worker a plan tool stands in for (``planning_tools``), or None for a bound tool."""
    return tool_entry(tool).agent_type


def planning_tools(tools: Sequence[BaseTool]) -> list[BaseTool]:
    """The tools a plan may give a step: the bound ones, with ``delegate`` replaced by a
    stand-in for each worker tool it names (``WORKER_TOOLS_METADATA``) that has request verbs
    and that no bound tool of the same name does already. A stand-in carries the worker tool's
    verbs and description, so "add 'x' to my tasks" goes to the ``tasks`` worker by its verb
    like to a bound ``add_task``; it is never called (the row gets the ``agentType``, and
    ``delegate`` runs it)."""
    bound = {tool.name for tool in tools}
    planned: list[BaseTool] = []
    for tool in tools:
        held = (tool.metadata or {}).get(WORKER_TOOLS_METADATA)
        stand_ins = [
            _stand_in(name, about)
            for name, about in (held.items() if isinstance(held, dict) else ())
            if named_entry(name, about.get("metadata")).verbs
        ]
        if not stand_ins:
            planned.append(tool)  # no worker tool has verbs: the model may still choose it
            continue
        planned.extend(stand_in for stand_in in stand_ins if stand_in.name not in bound)
    return planned


def _stand_in(name: str, about: Mapping[str, Any]) -> BaseTool:
    def not_called() -> str:
        raise RuntimeError(f"{name} is done by the {about['agentType']!r} worker, via delegate")

    entry = named_entry(name, about.get("metadata"))
    return StructuredTool.from_function(
        not_called,
        name=name,
        description=str(about.get("description") or name),
        metadata={
            COMPACT_METADATA: CompactTool(
                entry.verbs, entry.subject, agent_type=about["agentType"], reads=entry.reads
            )
        },
    )


def _verbs(tool: BaseTool) -> tuple[str, ...]:
    return tool_entry(tool).verbs


def steps_by_verb(steps: Sequence[RequestStep], tools: Sequence[BaseTool]) -> dict[str, str]:
    """The steps whose tool is known without the model: a heading is no action; a step whose
    words start with one tool's verb is that tool's (a verb that needs its subject only in a
    step about it: ``CompactTool.subject``); a step without a verb takes the tool of the
    words it follows ("add milk and eggs": eggs are added too). A negated step ("don't add
    anything") or a correction ("never mind the plants", "no, don't") is no action, and takes
    back the earlier steps it names (``_take_back``)."""
    decided: dict[str, str] = {}
    for index, step in enumerate(steps):
        if step.heading:
            decided[step.words] = NOT_AN_ACTION
            continue
        undo = _correction(step, tools)
        if undo is not None:
            decided[step.words] = NOT_AN_ACTION
            _take_back(steps[:index], decided, *undo)
            continue
        # A step that quotes what to act on ("continue adding 'x'") is about that, not about
        # the plan earlier turns left open.
        offered = [t for t in tools if t.name != CONTINUE_OPEN_TODOS] if step.quoted else tools
        named = _named_by_longest_verb(step.words, offered, step.quoted, step.clause)
        if not named and step.follows and not is_remark(step.phrase):
            # "add 'x', I keep forgetting it": a remark takes no verb from the words before.
            named = _named_by_longest_verb(step.follows, offered, step.quoted, step.clause)
            inherited = decided.get(step.follows)
            if not named and inherited is not None and inherited != NOT_AN_ACTION:
                named = [inherited]
        if len(named) > 1:
            named = [_by_place(step, [tool for tool in tools if tool.name in named])]
        if len(named) == 1:
            decided[step.words] = named[0]
    return decided


def doubtful_step(
    steps: Sequence[RequestStep], decided: Mapping[str, str], tools: Sequence[BaseTool]
) -> RequestStep | None:
    """The first step that corrects or hedges in words no rule reads, when the request would
    change something: "Add bread, no wait, make that rolls", "Add 'x'. Undo that.", "add
    apples, but not bananas". Acting on the rest would guess which words are the title and
    what was taken back, so nothing is done (``hesitates``). A correction the rules read
    ("never mind the plants", "don't add anything") is no doubt, nor are quoted titles."""
    entries = {tool.name: tool_entry(tool) for tool in tools}
    model_may_choose = bool(step_candidates(tools))  # else a step no verb names is no action
    changes = any(
        model_may_choose
        if decided.get(step.words) is None
        else decided[step.words] != NOT_AN_ACTION and not entries[decided[step.words]].reads
        for step in steps
        if not step.heading
    )
    if not changes:
        return None
    for step in steps:
        if step.heading or negated(step.words) is not None or retraction(step.words) is not None:
            continue
        tool = decided.get(step.words)
        if tool is None or tool == NOT_AN_ACTION:
            if hesitates(QUOTED.sub(" ", step.words)):
                return step
            continue
        verbs = entries[tool].verbs
        if step.quoted:
            text = " ".join(QUOTED.sub(" ", step.words).split())
            verb = verb_at_start(text, verbs)
            unsaid = _after(text, verb) if verb else text
        else:
            unsaid = core_phrase(step, verb_at_start(step.phrase, verbs))
        if hesitates(unsaid):
            return step
    return None


def deferred_step(
    steps: Sequence[RequestStep], decided: Mapping[str, str], tools: Sequence[BaseTool]
) -> tuple[RequestStep, str] | None:
    """The first step that would change an existing thing (a tool with a ``lookup``: complete,
    rename, delete) at a later time or on a condition, with the words that say when
    (``waits_for_something``, read outside quoted titles): "Delete 'buy milk' tomorrow",
    "Mark the report as done after I send it". Nothing of the request is done: the harness
    cannot wait, and doing it now is not what was asked. The words may be a clause of their
    own, with no action ("Once I get paid on Friday, mark 'pay rent' as done"): they are the
    request's condition. An addition's time words are its title's ("add call mom
    tomorrow")."""
    entries = {tool.name: tool_entry(tool) for tool in tools}

    def changes_existing(tool: str | None) -> bool:
        return tool not in (None, NOT_AN_ACTION) and entries[tool].lookup is not None

    if not any(changes_existing(decided.get(step.words)) for step in steps):
        return None
    for step in steps:
        tool = decided.get(step.words)
        if tool not in (None, NOT_AN_ACTION) and not changes_existing(tool):
            continue  # an addition's (or a read's) time words are its own
        if negated(step.words) is not None or retraction(step.words) is not None:
            continue
        unquoted = QUOTED.sub(" ", step.words)
        if changes_existing(tool):
            when = waits_for_something(unquoted)
        else:  # a clause with no action: only a condition or a time to come puts it off
            when = sets_a_condition(unquoted)
        if when is not None:
            return step, when
    return None


def _correction(step: RequestStep, tools: Sequence[BaseTool]) -> tuple[str | None, str] | None:
    """What a negated or correcting step takes back: the tool it names (None: any) and the
    words of what it names ("" or a pointing word: the last thing asked), or None when the step
    is neither."""
    rest = negated(step.words)
    if rest is None:
        rest = retraction(step.words)
        return None if rest is None else (None, rest)
    named = _named_by_longest_verb(rest, tools, quoted=True)
    tool = named[0] if len(named) == 1 else None
    verb = verb_at_start(rest, _verbs(next(t for t in tools if t.name == tool))) if tool else None
    return tool, core_phrase(RequestStep(rest, rest, False, rest), verb) if verb else rest


_ANYTHING = re.compile(r"^(?:anything|any|everything|all|any of (?:it|them|that))\b", re.I)


def _take_back(
    before: Sequence[RequestStep], decided: dict[str, str], tool: str | None, words: str
) -> None:
    """Mark as no action the earlier steps a correction names: with words, those of ``tool``
    (any tool when None) whose target shares a content word with them; with nothing or a
    pointing word ("no, don't", "scratch that"), the last action asked; with "anything", every
    earlier step of ``tool``. Words name a step when the words of one are all in the other
    (``_same_thing``)."""
    actions = [step for step in before if decided.get(step.words) not in (None, NOT_AN_ACTION)]
    if tool is not None:
        actions = [step for step in actions if decided[step.words] == tool]
    if _ANYTHING.match(words):
        chosen = actions
    elif not words or refers_back(words):
        chosen = actions[-1:]
    else:
        stems = content_stems(words)
        chosen = [step for step in actions if _same_thing(stems, content_stems(core_phrase(step)))]
    for step in chosen:
        decided[step.words] = NOT_AN_ACTION


def _same_thing(said: set[str], target: set[str]) -> bool:
    """Whether a correction's words name an earlier step's target: the words of one are all
    in the other ("the plants" and "water the plants"). One shared word is not enough: "don't
    add 'buy eggs'" takes nothing back from "add 'buy milk'"."""
    return bool(said and target) and (said <= target or target <= said)


def _named_by_longest_verb(
    words: str, tools: Sequence[BaseTool], quoted: bool = False, clause: str = ""
) -> list[str]:
    """The tools whose verb ``words`` start with, keeping only those with the longest such
    verb: "finish the rest" is a continuation, not "finish" (complete) on "the rest"; "mark as
    not done" reopens, not "mark". A verb that names its tool only in a step about the tool's
    subject counts only in such a step (its words, or the rest of its ``clause``: "put X and Y
    on my list"), or one that quotes a title (``quoted``)."""
    matched = {tool.name: _verb_for(words, tool, quoted, clause) for tool in tools}
    longest = max((len(verb) for verb in matched.values() if verb), default=0)
    return [name for name, verb in matched.items() if verb and len(verb) == longest]


def _verb_for(words: str, tool: BaseTool, quoted: bool, clause: str = "") -> str | None:
    """The verb of ``tool`` that ``words`` start with, counting a verb that needs the tool's
    subject only when the rest of the words are about it (or the step quotes a title)."""
    entry = tool_entry(tool)
    verbs, subject = entry.verbs, entry.subject
    if quoted or subject is None:
        return verb_at_start(words, verbs)
    needing = subject.verbs
    found = [verb_at_start(words, [verb for verb in verbs if verb not in needing])]
    weak = verb_at_start(words, [verb for verb in verbs if verb in needing])
    pattern = subject.pattern
    about = f"{_after(words, weak)} {_after(clause, weak)}" if weak is not None else ""
    if weak is not None and pattern and re.search(pattern, about, re.IGNORECASE):
        found.append(weak)
    return max((verb for verb in found if verb), key=len, default=None)


def _after(words: str, verb: str) -> str:
    """The words after ``verb`` (where a step starts with it), else all of them."""
    text = " ".join(words.split())
    at = text.casefold().find(verb.casefold())
    return text[at + len(verb) :] if at >= 0 else text


_WORDS = re.compile(r"[a-z0-9']+")


def _by_place(step: RequestStep, tools: Sequence[BaseTool]) -> str:
    """Of tools that share a verb (adding to the user's tasks or to the conversation's list),
    the one whose description's first line has words the step uses and the others' lack
    ("on this conversation's task list"); else the first bound (the default toolset's)."""
    said = set(_WORDS.findall(QUOTED.sub(" ", step.words).lower()))
    lines = {
        tool.name: set(_WORDS.findall((tool.description or "").strip().splitlines()[0].lower()))
        for tool in tools
    }
    scores = {
        name: len(said & (words - set().union(*(w for n, w in lines.items() if n != name))))
        for name, words in lines.items()
    }
    best = max(scores.values())
    winners = [name for name, score in scores.items() if score == best]
    return winners[0] if best > 0 and len(winners) == 1 else tools[0].name


def step_candidates(tools: Sequence[BaseTool]) -> list[str]:
    """The tools the model may choose for a step no verb decides: those that declare no verbs
    (an MCP server's, a user's own), which may do anything; empty when every tool declares its
    verbs, and the step is then no tool's."""
    return [tool.name for tool in tools if not _verbs(tool)]


def whole_request_items(steps: Sequence[RequestStep]) -> list[dict[str, Any]]:
    """The one item of a turn that must plan when no step is a tool's: the request itself,
    cancelled by the harness as something no tool does (``NOT_AN_ACTION``)."""
    title = " ".join(step.phrase for step in steps)[:MAX_PHRASE]
    action = PlannedAction(NOT_AN_ACTION, title, "")
    return [{"title": title, "context": action.as_context()}]


def plan_steps_tool(steps: Sequence[RequestStep], tools: Sequence[BaseTool]) -> dict[str, Any]:
    """The plan as a classification: one property per step of the request (its words are the
    key), each an enum of the domain tools and ``none``. The grammar makes the model answer
    every step once, in order, and nothing else."""
    listing = "; ".join(
        f"{tool.name}: {(tool.description or '').strip().splitlines()[0]}" for tool in tools
    )
    return {
        "type": "function",
        "function": {
            "name": PLAN_TOOL,
            "description": (
                "For each part of the user's request, the tool that does it, or "
                f"{NOT_AN_ACTION} if it asks for nothing to be done. {listing}"
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    step.words: {"enum": [*step_candidates(tools), NOT_AN_ACTION]} for step in steps
                },
                "required": [step.words for step in steps],
            },
        },
    }


def plan_items(
    steps: Sequence[RequestStep],
    chosen: Mapping[str, Any],
    tools: Sequence[BaseTool] = (),
    earlier: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The ``create_todo`` items for the steps given a tool: the title in the user's words
    (what to add, for an added task), the planned action in the row's context. Two steps that
    would do the same thing to the same words are one item. A pointing word ("it", "both")
    means what was named before it in the request, else what the previous turn named
    (``earlier``), only when that is exactly as many things (``_referents``); otherwise it
    stays as said, and the act step asks which task it means, never searching titles for it."""
    verbs = {tool.name: _verbs(tool) for tool in tools}
    workers = {tool.name: agent_type(tool) for tool in tools}
    items: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for index, step in enumerate(steps):
        tool = chosen.get(step.words)
        if not isinstance(tool, str) or tool in (NOT_AN_ACTION, CONTINUE_OPEN_TODOS):
            continue  # no item: a continuation's items are the rows it copies
        target = core_phrase(step, verb_at_start(step.phrase, verbs.get(tool, ())))
        creates = tool.startswith("add")
        pointed = None if creates else _pointed_with_quote(step, verbs.get(tool, ()))
        target = pointed or target
        targets = [target]
        if (pointed or not step.quoted) and refers_back(target):
            # "I paid the bill, tick it off": "it" is the words before; "check both off" acts
            # on the two things said before it, each an item of its own.
            found = _referents(steps[:index], chosen, verbs, referents_wanted(target), earlier)
            if found is None and creates:
                continue  # "add them" with nothing to add: no item
            targets = found or targets
        for target in targets:
            if (tool, target.casefold()) in seen:
                continue
            seen.add((tool, target.casefold()))
            if creates or not step.quoted:
                title = target if creates else step.phrase
                if len(targets) > 1 and not creates:  # "check both off" twice: which is which
                    title = f"{step.phrase}: {target}"
            else:
                title = f"{tool.replace('_', ' ')} '{step.phrase}'"
            action = PlannedAction(tool, target, step.words)
            item: dict[str, Any] = {"title": _shown(title), "context": action.as_context()}
            if workers.get(tool):
                item["agentType"] = workers[tool]  # a worker's tool: the item is delegated
            items.append(item)
    return items


_POINTED_TO_QUOTE = re.compile(
    r"^\s*(?P<ref>(?:it|that|this)(?:\s+(?:one|task|todo|item))?|them|both)\s+"
    r"(?:to|into|as)\s+['\"\u2018\u201c]",
    re.IGNORECASE,
)


def _pointed_with_quote(step: RequestStep, verbs: Sequence[str]) -> str | None:
    """The pointing word a quoted step acts on ("rename it to 'x'": "it"; the quote is the
    new value, not the task), or None."""
    if not step.quoted:
        return None
    verb = verb_at_start(step.words, list(verbs))
    text = " ".join(step.words.split())
    start = text.casefold().find(verb.casefold()) + len(verb) if verb else -1
    match = _POINTED_TO_QUOTE.match(text[start:]) if verb and start >= len(verb) else None
    return match["ref"] if match else None


def _shown(title: str) -> str:
    """A row's title: the words as said, cut with an ellipsis past a title's length (the
    target in the row's context stays whole, so nothing is done to a cut title)."""
    return title if len(title) <= MAX_PHRASE else title[: MAX_PHRASE - 1] + "\u2026"


def _referents(
    before: Sequence[RequestStep],
    chosen: Mapping[str, Any],
    verbs: Mapping[str, Sequence[str]],
    wanted: int | None,
    earlier: Sequence[str] = (),
) -> list[str] | None:
    """What a pointing word means: the things named by the nearest run of earlier steps of one
    kind (the same tool, or no action: "I washed the car and mowed the lawn"), else what the
    previous turn named; ``wanted`` of them exactly ("it" one, "both" two) or all ("them").
    None when that is not exactly the number the word counts: the harness never picks."""
    named: list[str] = []
    kind: object = None
    for step in reversed(before):
        if step.heading or retraction(step.words) is not None:
            continue
        rest = negated(step.words)
        if rest is not None:  # "don't delete 'x', just mark it done": the thing is still named
            step = step if step.quoted else RequestStep(rest, rest, False, rest)
        tool = chosen.get(step.words, NOT_AN_ACTION)
        if named and tool != kind:
            break
        kind = tool
        verb = verb_at_start(step.phrase, list(verbs.get(str(tool), ()))) if tool else None
        target = core_phrase(step, verb)
        if not refers_back(target) and content_stems(target) - LIGHT_VERBS:
            named.insert(0, target)
    found = named or list(earlier)
    if not found or (wanted is not None and len(found) != wanted):
        return None
    return found


LIGHT_VERBS = frozenset({"do", "just", "make", "get", "go", "have", "finish", "done"})
"""Words that name no task on their own: "I just did it" says nothing "it" could mean."""


def named_tasks(steps: Sequence[RequestStep], tools: Sequence[BaseTool]) -> list[str]:
    """The tasks a request named for its actions (what "it" or "them" means in the next turn):
    the targets of its last run of steps that add or act on one task, quoted or said."""
    decided = steps_by_verb(steps, tools)
    acting = {tool.name for tool in tools if tool.name.startswith("add")}
    acting |= {tool.name for tool in tools if tool_entry(tool).lookup}
    named: list[str] = []
    last = None
    for item in plan_items(steps, decided, tools):
        action = stored_action(item["context"])
        if action is None or action.tool not in acting or refers_back(action.target):
            continue
        if action.tool != last:
            named, last = [], action.tool
        named.append(action.target)
    return named
