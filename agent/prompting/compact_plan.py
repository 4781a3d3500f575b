"""The compact profile's plan: which tool does each step of the request, and the rows it makes.

A small model is not asked to write a plan (``agent.prompting.request_steps`` says why): the
request's steps get their tools from the verbs each tool declares
(``agent.tool_names.REQUEST_VERBS_METADATA``), the model chooses only for steps no verb decides
and tools that declare none, and each step given a tool becomes one ``create_todo`` item whose
title is the user's words and whose ``context`` records the planned action
(``PlannedAction``), so the act step knows its tool and its target from the database row.
The binding of each call is ``agent.prompting.compact_tools``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from agent.prompting.request_steps import (
    MAX_PHRASE,
    QUOTED,
    RequestStep,
    core_phrase,
    referents_wanted,
    refers_back,
    verb_at_start,
)
from agent.tool_names import (
    AGENT_TYPE_METADATA,
    CONTINUE_OPEN_TODOS,
    DELEGATED_TOOLS_METADATA,
    REQUEST_VERBS_METADATA,
)
from storage.models import TurnTodo

PLAN_TOOL = "plan_steps"
"""The compact plan's one function: for each step of the request, the tool that does it."""

NOT_AN_ACTION = "none"

NO_TOOL_OUTCOME = "no tool of mine does what this asks"

PLANNED_PREFIX = "use "
_PLANNED = re.compile(
    r'^use (?P<tool>[A-Za-z0-9_]+) on "(?P<target>[^"\n]*)"(?: \(from: (?P<clause>.*)\))?$', re.S
)


@dataclass(frozen=True)
class PlannedAction:
    """What the compact plan decided for a row: which tool does it, on which of the user's
    words, and the quoted words of the clause it came from. Kept in the row's ``context``
    (``use add_task on "buy groceries" (from: add 'buy groceries' to my tasks)``), so it is
    in the database with the row and readable in ``list_todo``."""

    tool: str
    target: str
    clause: str

    @property
    def clause_quotes(self) -> list[str]:
        return [
            next(g for g in match.groups() if g).strip() for match in QUOTED.finditer(self.clause)
        ]

    def as_context(self) -> str:
        target = self.target.replace('"', "'")
        return f'{PLANNED_PREFIX}{self.tool} on "{target}" (from: {self.clause})'


def planned_action(row: TurnTodo) -> PlannedAction | None:
    """The row's planned action, if the compact plan made it."""
    match = _PLANNED.match(row.context or "")
    if match is None:
        return None
    return PlannedAction(match["tool"], match["target"], match["clause"] or "")


def agent_type(tool: BaseTool) -> str | None:
    """The worker a plan tool stands in for (``planning_tools``), or None for a bound tool."""
    value = (tool.metadata or {}).get(AGENT_TYPE_METADATA)
    return value if isinstance(value, str) else None


def planning_tools(tools: Sequence[BaseTool]) -> list[BaseTool]:
    """The tools a plan may give a step: the bound ones, with ``delegate`` replaced by a
    stand-in for each worker tool it names (``DELEGATED_TOOLS_METADATA``) that no bound tool
    of the same name does already. A stand-in carries the worker tool's verbs and description,
    so "add 'x' to my tasks" goes to the ``tasks`` worker by its verb like to a bound
    ``add_task``; it is never called (the row gets the ``agentType``, and ``delegate`` runs it)."""
    bound = {tool.name for tool in tools}
    planned: list[BaseTool] = []
    for tool in tools:
        delegated = (tool.metadata or {}).get(DELEGATED_TOOLS_METADATA)
        if not isinstance(delegated, dict) or not delegated:
            planned.append(tool)  # no worker declares verbs: the model may still choose it
            continue
        for name, about in delegated.items():
            if name not in bound:
                planned.append(_stand_in(name, about))
    return planned


def _stand_in(name: str, about: Mapping[str, Any]) -> BaseTool:
    def not_called() -> str:
        raise RuntimeError(f"{name} is done by the {about['agentType']!r} worker, via delegate")

    return StructuredTool.from_function(
        not_called,
        name=name,
        description=str(about.get("description") or name),
        metadata={
            REQUEST_VERBS_METADATA: tuple(about.get("verbs", ())),
            AGENT_TYPE_METADATA: about["agentType"],
        },
    )


def _verbs(tool: BaseTool) -> tuple[str, ...]:
    verbs = (tool.metadata or {}).get(REQUEST_VERBS_METADATA, ())
    return tuple(verb for verb in verbs if isinstance(verb, str))


def steps_by_verb(steps: Sequence[RequestStep], tools: Sequence[BaseTool]) -> dict[str, str]:
    """The steps whose tool is known without the model: a heading is no action; a step whose
    words start with one tool's verb is that tool's; a step without a verb takes the tool of
    the words it follows ("add milk and eggs": eggs are added too)."""
    decided: dict[str, str] = {}
    for step in steps:
        if step.heading:
            decided[step.words] = NOT_AN_ACTION
            continue
        # A step that quotes what to act on ("continue adding 'x'") is about that, not about
        # the plan earlier turns left open.
        offered = [t for t in tools if t.name != CONTINUE_OPEN_TODOS] if step.quoted else tools
        named = _named_by_longest_verb(step.words, offered)
        if not named and step.follows:
            named = _named_by_longest_verb(step.follows, offered)
            inherited = decided.get(step.follows)
            if not named and inherited is not None and inherited != NOT_AN_ACTION:
                named = [inherited]
        if len(named) > 1:
            named = [_by_place(step, [tool for tool in tools if tool.name in named])]
        if len(named) == 1:
            decided[step.words] = named[0]
    return decided


def _named_by_longest_verb(words: str, tools: Sequence[BaseTool]) -> list[str]:
    """The tools whose verb ``words`` start with, keeping only those with the longest such
    verb: "finish the rest" is a continuation, not "finish" (complete) on "the rest"; "mark as
    not done" reopens, not "mark"."""
    matched = {tool.name: verb_at_start(words, _verbs(tool)) for tool in tools}
    longest = max((len(verb) for verb in matched.values() if verb), default=0)
    return [name for name, verb in matched.items() if verb and len(verb) == longest]


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
    steps: Sequence[RequestStep], chosen: Mapping[str, Any], tools: Sequence[BaseTool] = ()
) -> list[dict[str, Any]]:
    """The ``create_todo`` items for the steps given a tool: the title in the user's words
    (what to add, for an added task), the planned action in the row's context. Two steps that
    would do the same thing to the same words are one item."""
    verbs = {tool.name: _verbs(tool) for tool in tools}
    workers = {tool.name: agent_type(tool) for tool in tools}
    items: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for index, step in enumerate(steps):
        tool = chosen.get(step.words)
        if not isinstance(tool, str) or tool in (NOT_AN_ACTION, CONTINUE_OPEN_TODOS):
            continue  # no item: a continuation's items are the rows it copies
        target = core_phrase(step, verb_at_start(step.phrase, verbs.get(tool, ())))
        if (tool, target.casefold()) in seen or (tool.startswith("add") and refers_back(target)):
            # "add each of them as a task" adds the items already planned, nothing new.
            continue
        targets = [target]
        if refers_back(target):
            # "I paid the bill, tick it off": "it" is the words before, never a title to
            # search for ("it" is part of "electricity"); "check both off" acts on the two
            # things said before it, each an item of its own.
            targets = _referents(steps[:index], chosen, referents_wanted(target)) or targets
        for target in targets:
            if (tool, target.casefold()) in seen:
                continue
            seen.add((tool, target.casefold()))
            creates = tool.startswith("add")
            if creates or not step.quoted:
                title = target if creates else step.phrase
                if len(targets) > 1:  # "check both off" twice would not say which is which
                    title = f"{step.phrase}: {target}"
            else:
                title = f"{tool.replace('_', ' ')} '{step.phrase}'"
            action = PlannedAction(tool, target, step.words)
            item: dict[str, Any] = {"title": title[:MAX_PHRASE], "context": action.as_context()}
            if workers.get(tool):
                item["agentType"] = workers[tool]  # a worker's tool: the item is delegated
            items.append(item)
    return items


def _referents(
    before: Sequence[RequestStep], chosen: Mapping[str, Any], wanted: int | None
) -> list[str]:
    """What a pointing word means: the nearest earlier steps that are no action of their own,
    ``wanted`` of them ("it" one, "both" two), or all of them back to the last action ("them"),
    in the order they were said."""
    found: list[str] = []
    for step in reversed(before):
        if step.heading:
            continue
        if chosen.get(step.words) not in (None, NOT_AN_ACTION):
            if found:
                break  # "them" reaches back to the last action, no further
            continue
        found.insert(0, core_phrase(step))
        if wanted is not None and len(found) == wanted:
            break
    return found
