"""The compact prompt profile for small local models: which tools each step offers, with what
schema, and what reaches the server. No model runs here; the real model's behaviour under this
profile is measured in docs/local_model_runs.md."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic import SecretStr

from agent.context import Context
from agent.llm.chat_models import CompatibleChatOpenAI
from agent.prompting.builder import COMPACT, model_messages, prompt_profile
from agent.prompting.compact_tools import (
    DISPATCH_TOOL,
    step_binding,
    unwrap_dispatch,
)
from agent.tools.ask_user import build_ask_user_tool
from agent.tools.personal_tasks import build_task_tools
from agent.tools.todos import build_todo_tools
from storage import Database
from storage.models import TurnTodo

REQUEST = (
    "Plan my Saturday: add 'buy groceries' and 'do laundry' to my tasks, then show me the rest"
)


@pytest.fixture
def tools() -> list[Any]:
    database = Database("sqlite+aiosqlite:///:memory:")
    return [
        *build_todo_tools(database),
        build_ask_user_tool(database),
        *build_task_tools(database),
    ]


def row(title: str, status: str, *, id: str = "id-1", outcome: str | None = None) -> TurnTodo:
    return TurnTodo(id=id, title=title, status=status, outcome=outcome, priority=0)


def tool_result(name: str, *, error: bool = False, content: str = "{}") -> ToolMessage:
    return ToolMessage(
        content=content,
        tool_call_id=f"call-{name}",
        name=name,
        status="error" if error else "success",
    )


def variants(binding: Any) -> dict[str, dict[str, Any]]:
    """The dispatch tool's variants by tool name: {name: arguments schema}."""
    [tool] = binding.tools
    return {
        variant["properties"]["name"]["const"]: variant["properties"]["arguments"]
        for variant in tool["function"]["parameters"]["anyOf"]
    }


@pytest.mark.parametrize(
    ("setting", "choice", "expected"),
    [
        ("local", "auto", "compact"),
        ("local:qwen2.5-coder-1.5b", "auto", "compact"),
        ("openai:gpt-4o-mini", "auto", "full"),
        (None, "auto", "full"),  # a chat model instance: only an explicit choice counts
        ("openai:qwen2.5", "compact", "compact"),
        ("local", "full", "full"),
    ],
)
def test_the_embedded_model_gets_the_compact_profile_unless_told_otherwise(
    setting: str | None, choice: Any, expected: str
) -> None:
    assert prompt_profile(Context(prompt_profile=choice), setting).name == expected


def test_unknown_profile_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="'auto', 'full' or 'compact'"):
        Context(prompt_profile="tiny")  # type: ignore[arg-type]


def test_forced_planning_offers_create_todo_alone_with_titles_only(tools: list[Any]) -> None:
    binding = step_binding(tools, [], [HumanMessage(REQUEST)], "create_todo", REQUEST)

    [tool] = binding.tools
    item = tool["function"]["parameters"]["properties"]["items"]["items"]
    assert binding.tool_choice == "create_todo"
    assert list(item["properties"]) == ["title"]  # context, criteria, agentType, order dropped
    assert item["properties"]["title"]["maxLength"] <= 120


def test_an_item_just_started_offers_the_domain_tools_with_the_users_words(
    tools: list[Any],
) -> None:
    rows = [row("buy groceries", "in_progress"), row("do laundry", "pending", id="id-2")]

    binding = step_binding(tools, rows, [tool_result("create_todo")], None, REQUEST)
    offered = variants(binding)

    assert binding.tool_choice == DISPATCH_TOOL
    assert set(offered) == {  # no ask_user: an unattended small model must not pause the run
        "add_task",
        "list_tasks",
        "complete_task",
        "update_task",
        "delete_task",
        "complete_todo",
    }
    # A free title is limited to the item's own words and the request's matching quote.
    assert offered["add_task"]["properties"]["title"] == {"enum": ["buy groceries"]}
    assert offered["complete_todo"]["properties"]["todoId"] == {"const": "id-1"}
    assert "description" not in offered["add_task"]["properties"]  # optional free text dropped


def test_quoted_words_of_the_request_ground_an_item_that_names_them() -> None:
    from agent.prompting.compact_tools import grounded_phrases

    current = row("Add 'call mom' to my tasks", "in_progress")

    phrases = grounded_phrases(current, "Please add 'call mom' and 'pay rent'")

    assert phrases == ["call mom", "Add 'call mom' to my tasks"]  # 'pay rent' is another item


def test_after_a_successful_action_the_model_must_close_the_item_as_completed(
    tools: list[Any],
) -> None:
    rows = [row("buy groceries", "in_progress")]
    added = json.dumps({"status": "success", "title": "buy groceries"})
    history = [
        tool_result("create_todo"),
        AIMessage(content=""),
        tool_result("add_task", content=added),
    ]

    binding = step_binding(tools, rows, history, None, REQUEST)
    [tool] = binding.tools
    properties = tool["function"]["parameters"]["properties"]

    assert binding.tool_choice == "complete_todo"
    assert properties["todoId"] == {"const": "id-1"}
    assert properties["outcome"] == {"enum": ["add_task: buy groceries"]}
    assert "status" not in properties


def test_after_failed_actions_the_model_may_cancel_the_item(tools: list[Any]) -> None:
    rows = [row("buy groceries", "in_progress")]
    history = [
        tool_result("create_todo"),
        tool_result("add_task", error=True),
        tool_result("add_task", error=True),
    ]

    binding = step_binding(tools, rows, history, None, REQUEST)
    [tool] = binding.tools

    assert binding.tool_choice == "complete_todo"
    assert tool["function"]["parameters"]["properties"]["status"]["enum"] == [
        "completed",
        "cancelled",
    ]


def test_one_failed_action_gets_another_try(tools: list[Any]) -> None:
    rows = [row("buy groceries", "in_progress")]
    history = [tool_result("create_todo"), tool_result("add_task", error=True)]

    assert step_binding(tools, rows, history, None, REQUEST).tool_choice == DISPATCH_TOOL


async def test_a_finished_plan_is_answered_from_its_rows_without_the_model(
    tools: list[Any],
) -> None:
    from agent.prompting.compact_tools import bind_step

    rows = [row("buy groceries", "completed", outcome="added 'buy groceries'")]
    binding = step_binding(tools, rows, [tool_result("complete_todo")], None, REQUEST)
    unusable = CompatibleChatOpenAI(
        model="local", base_url="http://127.0.0.1:9/v1", api_key=SecretStr("x"), max_retries=0
    )

    answer = await bind_step(unusable, binding, rows).ainvoke([])

    assert binding.phase == "answer"
    assert "buy groceries" in answer.content
    assert "added 'buy groceries'" in answer.content


def test_the_dispatch_call_reaches_the_tools_node_as_the_real_tool_call() -> None:
    message = AIMessage(
        content="",
        tool_calls=[
            {
                "name": DISPATCH_TOOL,
                "args": {"name": "add_task", "arguments": {"title": "buy groceries"}},
                "id": "call-1",
            }
        ],
    )

    [call] = unwrap_dispatch(message).tool_calls

    assert (call["name"], call["args"], call["id"]) == (
        "add_task",
        {"title": "buy groceries"},
        "call-1",
    )


def test_the_plan_goes_last_so_the_system_prompt_is_identical_across_calls() -> None:
    rows = [row("buy groceries", "in_progress")]

    def prompt(rows: list[TurnTodo]) -> list[Any]:
        return model_messages(
            base_prompt="stable",
            history=[HumanMessage(REQUEST, id="h")],
            history_limit=4,
            rows=rows,
            turn_request=REQUEST,
            turn_message_id="h",
            profile=COMPACT,
        )

    first, later = prompt(rows), prompt([row("buy groceries", "completed", outcome="ok")])

    assert first[0] == later[0] == SystemMessage(content="stable")
    assert "buy groceries" in first[-1].content
    assert first[-1].content != later[-1].content


def test_local_token_cap_is_sent_as_max_tokens() -> None:
    """llama-cpp-python's server ignores ``max_completion_tokens`` (what langchain-openai sends):
    without this, a capped call could run until the context is full."""
    model = CompatibleChatOpenAI(
        model="local",
        base_url="http://127.0.0.1:9/v1",
        api_key=SecretStr("x"),
        max_tokens=64,
        legacy_max_tokens=True,
    )

    payload = model._get_request_payload([HumanMessage("hi")])

    assert payload["max_tokens"] == 64
    assert "max_completion_tokens" not in payload
    assert json.dumps(payload)  # still one JSON body
