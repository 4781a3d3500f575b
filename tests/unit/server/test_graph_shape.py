"""The shape of the supervisor graph, pinned: Studio and SDK users rely on these node names."""

from __future__ import annotations

from agent.app.served import served
from agent.context import Context
from agent.graph import build_graph
from agent.prompting.builder import system_prompt

EXPECTED_EDGES = {
    ("__start__", "plan"),
    ("plan", "tools"),
    ("plan", "drain"),
    ("plan", "__end__"),
    ("execute", "tools"),
    ("execute", "drain"),
    ("execute", "__end__"),
    ("tools", "execute"),
    ("tools", "drain"),
    ("drain", "execute"),
    ("drain", "__end__"),
}

graph = served.get().graph  # what langgraph.json serves


def test_graph_has_plan_execute_drain_and_tools_wired_as_designed() -> None:
    drawn = graph.get_graph()
    assert set(drawn.nodes) == {"__start__", "plan", "execute", "tools", "drain", "__end__"}
    assert {(edge.source, edge.target) for edge in drawn.edges} == EXPECTED_EDGES


def test_module_graph_has_no_checkpointer_so_the_dev_server_can_serve_it() -> None:
    assert graph.checkpointer is None


def test_context_schema_exposes_the_settings() -> None:
    schema = graph.get_context_jsonschema()
    assert schema is not None
    assert {"model", "user_id", "base_iterations", "max_iterations", "history_limit"} <= set(
        schema["properties"]
    )
    assert Context().base_iterations == 10 and Context().max_iterations == 50
    assert Context().history_limit == 10


def test_state_carries_the_turn_and_conversation_ids() -> None:
    output = graph.get_output_jsonschema()
    assert {"conversationId", "turnId", "turnStatus", "modifiedTasks", "messages"} <= set(
        output["properties"]
    )


def test_the_tools_node_knows_todos_every_builtin_toolset_and_your_own() -> None:
    """Each run binds its own selection (``tests/unit/tools/test_toolsets.py``); the node can run
    them all."""
    from langchain_core.tools import tool

    @tool
    def lookup_weather(city: str) -> str:
        """Weather for a city."""
        return "sunny"

    built = build_graph("openai:unused", tools=[lookup_weather])
    tools_node = built.get_graph().nodes["tools"].data
    names = set(tools_node.tools_by_name)  # type: ignore[union-attr]
    assert names == {
        "create_todo",
        "list_todo",
        "complete_todo",
        "continue_open_todos",
        "ask_user",
        "add_task",
        "list_tasks",
        "complete_task",
        "update_task",
        "delete_task",
        "ListTasks",
        "AddTask",
        "CompleteTask",
        "UncompleteTask",
        "DeleteTask",
        "lookup_weather",
    }


def test_planning_section_only_when_create_todo_is_bound() -> None:
    assert "## Task planning and execution" in system_prompt({"create_todo", "add_task"})
    assert "## Task planning and execution" not in system_prompt({"add_task"})
