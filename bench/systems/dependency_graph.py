"""The dependency-graph scenario (issue 30): the N items in layers (``bench.scenario.layers_of``),
each item needing the results of every item of the layer before it. No system may act on an item
before its blockers are done, so every path takes one call per layer at best.

- ``turnplan-deps``: one ``create_todo`` with every item's ``blockedBy`` (the first layer, which
  waits for nothing, shares ``"order": 1`` so it starts whole) and the first layer's actions;
  per call, ``complete_todo`` for every ``[>]`` row and the actions of the layer those closes
  free (the graph starts the whole layer at once, the actions run after the closes); close the
  last layer; answer. L + 2 calls for L layers. The oracle reads the plan view and
  notes, as ``problem``, any call where the rows in progress are not exactly the expected layer.
- ``todolist-deps``: ``create_agent`` + ``TodoListMiddleware``, the same discipline:
  ``write_todos`` (layer 1 in progress) + its actions; per call ``write_todos`` (that layer
  completed, the next in progress) + its actions; ``write_todos`` (all completed); answer.
  L + 2 calls.
- ``react-deps``: the prebuilt ReAct agent, no plan: per call, one layer's actions; answer.
  L + 1 calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.scenario import action, blockers_of, layers_of
from bench.systems.react import ReactSystem
from bench.systems.todo_oracles import WRITE_TODOS
from bench.systems.todolist import TodoListSystem
from bench.systems.turnplan import TurnplanSystem
from bench.systems.turnplan_stages import IN_PROGRESS, OPEN_MARKS, plan_in_request
from bench.wire import Body, Oracle, assistant_calls
from tests.scripted_openai import Reply, text, tool_calls

ANSWER = "All done."


@dataclass
class DependencyOracle:
    """turnplan's path through the layers (see the module docstring)."""

    titles: list[str]
    layer: int = -1
    """The layer whose actions were sent last (-1: nothing planned yet)."""
    problem: str = ""
    closed: set[str] = field(default_factory=set)

    def __call__(self, body: Body) -> Reply:
        layers = layers_of(self.titles)
        rows = plan_in_request(body)
        if self.layer < 0:
            self.layer = 0
            blocked = blockers_of(self.titles)
            items: list[dict[str, Any]] = []
            for title, blockers in zip(self.titles, blocked, strict=True):
                item: dict[str, Any] = {"title": title}
                if blockers:
                    item["blockedBy"] = blockers
                else:
                    item["order"] = 1
                items.append(item)
            return tool_calls(
                ("create_todo", {"items": items}), *(action(self.titles[i]) for i in layers[0])
            )
        working = [row for row in rows if row.mark == IN_PROGRESS and row.id not in self.closed]
        if not any(row.mark in OPEN_MARKS for row in rows):
            return text(ANSWER)
        if self.layer >= len(layers):
            self.problem = self.problem or "rows still open after the last layer was closed"
            return text(ANSWER)
        expected = {self.titles[i] for i in layers[self.layer]}
        if {row.title for row in working} != expected and not self.problem:
            self.problem = (
                f"layer {self.layer + 1}: rows in progress {sorted(r.title for r in working)}"
            )
        if not working:
            self.problem = self.problem or "no row in progress while rows are open"
            return text(ANSWER)
        self.closed.update(str(row.id) for row in working)
        closes = [
            ("complete_todo", {"todoId": row.id, "outcome": f"did {row.title}"}) for row in working
        ]
        self.layer += 1
        following = layers[self.layer] if self.layer < len(layers) else []
        return tool_calls(*closes, *(action(self.titles[i]) for i in following))


def _todolist_oracle(titles: list[str]) -> Oracle:
    """``write_todos`` moved one layer at a time, with that layer's actions."""
    layers = layers_of(titles)

    def todos(done: int) -> list[dict[str, str]]:
        status = {}
        for number, layer in enumerate(layers):
            state = "completed" if number < done else "in_progress" if number == done else "pending"
            status.update(dict.fromkeys(layer, state))
        return [{"content": title, "status": status[i]} for i, title in enumerate(titles)]

    def respond(body: Body) -> Reply:
        done = len(assistant_calls(body))  # one message per layer so far
        if done > len(layers):
            return text(ANSWER)
        acting = layers[done] if done < len(layers) else []
        return tool_calls(
            (WRITE_TODOS, {"todos": todos(done)}), *(action(titles[i]) for i in acting)
        )

    return respond


def _react_oracle(titles: list[str]) -> Oracle:
    """One layer's actions per call, then the answer."""
    layers = layers_of(titles)

    def respond(body: Body) -> Reply:
        done = len(assistant_calls(body))
        if done >= len(layers):
            return text(ANSWER)
        return tool_calls(*(action(titles[i]) for i in layers[done]))

    return respond


class TurnplanDepsSystem(TurnplanSystem):
    """turnplan with ``blockedBy`` (see the module docstring)."""

    name = "turnplan-deps"
    path = "create_todo(blockedBy) + layer 1; per call close [>] rows + next layer; answer (L+2)"

    def oracle(self, titles: list[str]) -> Oracle:
        return DependencyOracle(titles)


class TodoListDepsSystem(TodoListSystem):
    """``TodoListMiddleware`` through the layers (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.name = "todolist-deps"
        self.path = "write_todos(layer in progress) + its actions, per layer; write_todos; (L+2)"

    def oracle(self, titles: list[str]) -> Oracle:
        return _todolist_oracle(titles)


class ReactDepsSystem(ReactSystem):
    """The prebuilt ReAct agent through the layers (see the module docstring)."""

    name = "react-deps"
    path = "one layer's actions per call; answer (L+1)"

    def oracle(self, titles: list[str]) -> Oracle:
        return _react_oracle(titles)
