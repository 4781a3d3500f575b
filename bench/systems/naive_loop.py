"""Seed 004's naive loop on turnplan's own graph and tools: create, then per item act, complete,
list.

This is the loop the seed's first prompt describes ("after each item, check ``list_todo`` for
remaining work"), run on the real turnplan graph so the difference to ``turnplan`` is only the
path the model takes. The oracle ignores the plan view and reads tool results, as a model
following that prompt would:

- nothing done yet in this turn: ``create_todo`` with every item;
- the last result is ``create_todo`` or a non-empty ``list_todo``: act on the first open item;
- the last result is the domain action: ``complete_todo`` for that item (id from the latest
  ``create_todo``/``list_todo`` result in the request);
- the last result is ``complete_todo``: ``list_todo``;
- ``list_todo`` shows nothing open: answer.

1 + 3N + 1 = 3N + 2 calls.
"""

from __future__ import annotations

import json
from typing import Any

from bench.scenario import ACTION_TOOL, action
from bench.systems.turnplan import TurnplanSystem
from bench.wire import Body, Oracle, assistant_calls, tool_results
from tests.fakes import plan_rows
from tests.http_oracle import plan_view_of
from tests.scripted_openai import Reply, text, tool_calls


def _known_ids(results: list[tuple[str, str]]) -> dict[str, str]:
    """title -> id from the newest ``create_todo`` or ``list_todo`` result that names it."""
    ids: dict[str, str] = {}
    for name, content in results:
        if name == "create_todo":
            rows: list[dict[str, Any]] = json.loads(content).get("created", [])
        elif name == "list_todo":
            rows = json.loads(content).get("items", [])
        else:
            continue
        ids.update({row["title"]: row["id"] for row in rows})
    return ids


def naive_oracle(titles: list[str]) -> Oracle:
    """The naive loop's oracle over ``titles`` (see the module docstring)."""

    def respond(body: Body) -> Reply:
        results = tool_results(body)
        rows = plan_rows(plan_view_of(body))
        if not assistant_calls(body) and not rows:
            return tool_calls(("create_todo", {"items": [{"title": t} for t in titles]}))
        # turnplan leaves out the plan calls its plan view reports: with none of the turn's
        # calls in the request, the newest step created the plan or closed an item.
        last_name, last_content = results[-1] if results else ("", "")
        if not results and not any(row.mark == "x" for row in rows):
            first = next(row for row in rows if row.mark == ">")
            return tool_calls(action(first.title))
        offered = {tool["function"]["name"] for tool in body.get("tools") or []}
        if not results and "list_todo" in offered:
            return tool_calls(("list_todo", {}))
        if not results:  # a plan of one stage: no list_todo, the view lists every open row
            current = next((row for row in rows if row.mark == ">"), None)
            return tool_calls(action(current.title)) if current else text("All done.")
        if last_name == "create_todo":
            first = json.loads(last_content)["created"][0]["title"]
            return tool_calls(action(first))
        if last_name == ACTION_TOOL:
            title = json.loads(last_content)["done"]
            shown = {row.title: row.id for row in rows if row.id}
            todo_id = {**shown, **_known_ids(results)}[title]
            return tool_calls(("complete_todo", {"todoId": todo_id, "outcome": f"did {title}"}))
        if last_name == "complete_todo":
            return tool_calls(("list_todo", {}))
        if last_name == "list_todo":
            items = json.loads(last_content)["items"]
            if items:
                return tool_calls(action(items[0]["title"]))
            return text("All done.")
        raise AssertionError(f"naive oracle: unexpected last tool result {last_name!r}")

    return respond


class NaiveLoopSystem(TurnplanSystem):
    """turnplan's graph, driven along seed 004's naive loop."""

    name = "naive-loop"
    path = "create_todo; per item: act, complete_todo, list_todo; answer (3N+2)"

    def oracle(self, titles: list[str]) -> Oracle:
        return naive_oracle(titles)
