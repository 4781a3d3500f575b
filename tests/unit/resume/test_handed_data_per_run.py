"""What one step of a run hands to the next (the turn's rows, the message a model step just
wrote) lives in the run's own state and the calls' config, never in a process-wide registry: a
run that starts from a checkpoint (a resume, a Studio replay, a fork) has nothing handed over and
reads the database instead of trusting anything."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from sqlalchemy import event
from sqlalchemy.engine import Engine

from agent.context import Context
from agent.graph import build_graph
from agent.state import InputState
from bench.scenario import ActionLog, action, request_for, titles_for
from bench.wire import InstantChatModel
from storage import Database
from tests.http_oracle import HttpPlanOracle

ROOT = Path(__file__).resolve().parents[3]

MAPPING_FACTORIES = frozenset(
    {"dict", "OrderedDict", "defaultdict", "WeakKeyDictionary", "WeakValueDictionary"}
)
KEYED_METHODS = frozenset({"get", "pop", "setdefault", "__getitem__", "__setitem__"})


def _is_mapping(value: ast.expr | None) -> bool:
    if isinstance(value, (ast.Dict, ast.DictComp)):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in MAPPING_FACTORIES
    return False


def _calls_id(node: ast.AST) -> bool:
    return any(
        isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "id"
        for inner in ast.walk(node)
    )


def id_keyed_registries(source: str) -> list[str]:
    """Module-level mappings of ``source`` that some code indexes with a key built from
    ``id(...)``, as ``name:line``."""
    tree = ast.parse(source)
    mappings: set[str] = set()
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and _is_mapping(statement.value):
            mappings.update(t.id for t in statement.targets if isinstance(t, ast.Name))
        elif (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and _is_mapping(statement.value)
        ):
            mappings.add(statement.target.id)
    found: list[str] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id in mappings
            and _calls_id(node.slice)
        ):
            found.append(f"{node.value.id}:{node.lineno}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in mappings
            and node.func.attr in KEYED_METHODS
            and node.args
            and _calls_id(node.args[0])
        ):
            found.append(f"{node.func.value.id}:{node.lineno}")
        elif (
            isinstance(node, ast.Compare)
            and _calls_id(node.left)
            and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
            and any(isinstance(c, ast.Name) and c.id in mappings for c in node.comparators)
        ):
            found.append(f"{node.comparators[0]}:{node.lineno}")
    return found


OLD_HANDOFF = """
from collections import OrderedDict
_handoffs: OrderedDict[int, tuple] = OrderedDict()
_fresh = {}
_calls_by_state_id: dict = {}

def hand_over(todos, rows):
    _handoffs[id(todos)] = (todos, rows)

def take(message):
    return _fresh.pop(id(message), None)

def calls(state, key):
    return _calls_by_state_id.get((id(state), key))
"""


def test_the_check_finds_registries_keyed_by_id() -> None:
    """The three registries this replaced, as they were written, are each caught."""
    found = id_keyed_registries(OLD_HANDOFF)
    assert {entry.split(":")[0] for entry in found} == {
        "_handoffs",
        "_fresh",
        "_calls_by_state_id",
    }
    assert id_keyed_registries("cache = {}\ndef put(key, value):\n    cache[key] = value\n") == []


def test_no_module_of_agent_or_storage_keeps_a_registry_keyed_by_id() -> None:
    modules = [path for folder in ("agent", "storage") for path in (ROOT / folder).rglob("*.py")]
    assert len(modules) > 50  # the check reads the real tree, not an empty folder
    offenders = {
        str(path.relative_to(ROOT)): found
        for path in sorted(modules)
        if (found := id_keyed_registries(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, (
        "hand data between steps in graph state, the call's config or the database, "
        f"not in a module-level mapping keyed by id(): {offenders}"
    )


def _count_reads(statements: list[str]) -> dict[str, int]:
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    return {
        table: sum(1 for s in selects if f"FROM {table}" in s)
        for table in ("tool_results", "turn_todos")
    }


async def _turn(
    tmp_path: Path, name: str, *, pause_before_tools: bool
) -> tuple[dict[str, Any], dict[str, int]]:
    """A two-item turn; with ``pause_before_tools``, the run stops before its first tools step
    and a second run resumes it from the checkpoint. Returns the final state and the reads of
    the run that ran that first tools step."""
    titles = titles_for(2)
    database = Database(f"sqlite+aiosqlite:///{tmp_path / f'{name}.db'}")
    await database.create_schema()
    graph = build_graph(
        InstantChatModel(oracle=HttpPlanOracle(titles, action)),
        tools=[ActionLog().tool()],
        database=database,
        include_default_tools=False,
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": name}, "recursion_limit": 200}
    context = Context(max_iterations=200)
    request = InputState(messages=[HumanMessage(content=request_for(titles))])
    statements: list[str] = []

    def note(*args: object) -> None:
        statements.append(str(args[2]))

    try:
        if pause_before_tools:
            await graph.ainvoke(request, config, context=context, interrupt_before=["tools"])
            assert (await graph.aget_state(config)).next == ("tools",)
            event.listen(Engine, "before_cursor_execute", note)
            state = await graph.ainvoke(None, config, context=context)
        else:
            event.listen(Engine, "before_cursor_execute", note)
            state = await graph.ainvoke(request, config, context=context)
    finally:
        event.remove(Engine, "before_cursor_execute", note)
        await database.dispose()
    return state, _count_reads(statements)


async def test_a_run_resumed_from_a_checkpoint_reads_what_a_straight_run_was_handed(
    tmp_path: Path,
) -> None:
    """The resumed run's first tools step reads the call records (the gate) and the rows,
    which a run going straight on takes from the step before; the turn ends the same."""
    straight, straight_reads = await _turn(tmp_path, "straight", pause_before_tools=False)
    resumed, resumed_reads = await _turn(tmp_path, "resumed", pause_before_tools=True)

    for state in (straight, resumed):
        assert state["turnStatus"] == "answered"
        assert [todo["status"] for todo in state["todos"]] == ["completed", "completed"]
    assert resumed_reads["tool_results"] == straight_reads["tool_results"] + 1
    assert resumed_reads["turn_todos"] > straight_reads["turn_todos"]


async def _reads_as_a_subgraph(tmp_path: Path, n: int) -> int:
    """SELECTs of an n-item turn run by turnplan's graph as the node of a parent graph whose
    state is a plain messages state (the parent holds the checkpointer)."""
    titles = titles_for(n)
    database = Database(f"sqlite+aiosqlite:///{tmp_path / f'nested-{n}.db'}")
    await database.create_schema()
    turnplan = build_graph(
        InstantChatModel(oracle=HttpPlanOracle(titles, action)),
        tools=[ActionLog().tool()],
        database=database,
        include_default_tools=False,
    )
    parent = StateGraph(MessagesState, context_schema=Context)
    parent.add_node("turnplan", turnplan)
    parent.add_edge(START, "turnplan")
    parent.add_edge("turnplan", END)
    graph = parent.compile(checkpointer=InMemorySaver())
    selects: list[str] = []

    def note(*args: object) -> None:
        if str(args[2]).lstrip().upper().startswith("SELECT"):
            selects.append(str(args[2]))

    event.listen(Engine, "before_cursor_execute", note)
    try:
        state = await graph.ainvoke(
            {"messages": [HumanMessage(content=request_for(titles))]},
            {"configurable": {"thread_id": f"nested-{n}"}, "recursion_limit": 500},
            context=Context(max_iterations=500),
        )
    finally:
        event.remove(Engine, "before_cursor_execute", note)
        await database.dispose()
    assert isinstance(state["messages"][-1], AIMessage)
    assert not state["messages"][-1].tool_calls
    return len(selects)


async def test_inside_a_parent_graph_each_step_still_takes_what_the_step_before_handed_over(
    tmp_path: Path,
) -> None:
    """The hand-overs live in the subgraph's own state and its calls' config: a longer plan
    makes no further reads there either."""
    assert await _reads_as_a_subgraph(tmp_path, 3) == await _reads_as_a_subgraph(tmp_path, 9)
