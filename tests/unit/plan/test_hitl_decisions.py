"""LangChain's HITL shape for both pauses: the interrupt carries ``action_requests`` and
``review_configs`` as agent-chat-ui reads them, and ``{"decisions": [...]}`` approves, edits
(with arguments as agent-chat-ui's textareas send them: JSON text), rejects or responds; a user
message sent agent-chat-ui's way (a ``do-not-render-`` placeholder first) answers a question."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.types import Command

from storage import Database
from tests.unit.plan.test_ask_user import CONFIG as ASK_CONFIG
from tests.unit.plan.test_ask_user import AmbiguousTitleModel, done_tasks, setup
from tests.unit.plan.test_plan_approval import CONFIG, paused, task_titles


def decisions(*decision: dict[str, Any]) -> Command[Any]:
    return Command(resume={"decisions": list(decision)})


async def test_the_plan_approval_is_a_hitl_request_agent_chat_ui_renders(
    database: Database,
) -> None:
    _, result = await paused(database)

    (pause,) = result["__interrupt__"]
    (action,) = pause.value["action_requests"]
    assert action["name"] == "create_todo"
    assert action["args"] == {"items": [{"title": "Add bread"}, {"title": "Add milk"}]}
    assert "1. Add bread\n2. Add milk" in action["description"]
    assert pause.value["review_configs"] == [
        {"action_name": "create_todo", "allowed_decisions": ["approve", "edit", "reject"]}
    ]
    assert pause.value["type"] == "plan_approval"  # the short form's keys stay


async def test_an_approve_decision_works_the_plan(database: Database) -> None:
    graph, _ = await paused(database)

    done = await graph.ainvoke(decisions({"type": "approve"}), CONFIG)

    assert done["turnStatus"] == "answered"
    assert await task_titles(database) == ["bread", "milk"]


async def test_an_edit_decision_with_the_items_as_json_text_replaces_the_plan(
    database: Database,
) -> None:
    graph, _ = await paused(database)
    edited = json.dumps([{"title": "Add eggs"}, {"title": "Add tea"}])  # the textarea's text

    done = await graph.ainvoke(
        decisions(
            {"type": "edit", "edited_action": {"name": "create_todo", "args": {"items": edited}}}
        ),
        CONFIG,
    )

    assert done["turnStatus"] == "answered"
    assert [(r["title"], r["status"]) for r in done["todos"]] == [
        ("Add eggs", "completed"),
        ("Add tea", "completed"),
    ]
    assert await task_titles(database) == ["eggs", "tea"]


async def test_a_reject_decision_records_its_message_on_the_cancelled_rows(
    database: Database,
) -> None:
    graph, _ = await paused(database)

    done = await graph.ainvoke(decisions({"type": "reject", "message": "too much"}), CONFIG)

    assert [(r["status"], r["outcome"]) for r in done["todos"]] == [
        ("cancelled", "Rejected by the user: too much")
    ] * 2
    assert await task_titles(database) == []


async def test_a_bad_decision_asks_again_with_the_error_and_changes_nothing(
    database: Database,
) -> None:
    graph, _ = await paused(database)

    again = await graph.ainvoke(decisions({"type": "respond", "message": "hm"}), CONFIG)
    (pause,) = again["__interrupt__"]
    assert "must be one of approve, edit, reject" in pause.value["error"]
    assert pause.value["error"] in pause.value["action_requests"][0]["description"]
    again = await graph.ainvoke(
        decisions(
            {"type": "edit", "edited_action": {"name": "create_todo", "args": {"items": "[{}]"}}}
        ),
        CONFIG,
    )
    (pause,) = again["__interrupt__"]
    assert '"edit" needs valid "items"' in pause.value["error"]
    assert await task_titles(database) == []

    done = await graph.ainvoke(decisions({"type": "approve"}), CONFIG)
    assert done["turnStatus"] == "answered"


async def test_the_question_is_a_hitl_request_and_respond_answers_it(database: Database) -> None:
    graph, paused_run = await setup(database, AmbiguousTitleModel())

    (pause,) = paused_run["__interrupt__"]
    (action,) = pause.value["action_requests"]
    assert action["name"] == "ask_user"
    assert action["args"] == {
        "question": "Which call task?",
        "options": ["call mom", "call dad"],
        "answer": "",
    }
    assert pause.value["review_configs"][0]["allowed_decisions"] == ["respond", "edit", "reject"]

    result = await graph.ainvoke(decisions({"type": "respond", "message": "call dad"}), ASK_CONFIG)

    assert result["turnStatus"] == "answered"
    assert await done_tasks(database) == {"call mom": False, "call dad": True}


async def test_an_edit_of_the_answer_argument_answers_the_question(database: Database) -> None:
    graph, _ = await setup(database, AmbiguousTitleModel())
    args = {
        "question": "Which call task?",
        "options": '["call mom", "call dad"]',
        "answer": "call mom",
    }

    result = await graph.ainvoke(
        decisions({"type": "edit", "edited_action": {"name": "ask_user", "args": args}}),
        ASK_CONFIG,
    )

    assert result["turnStatus"] == "answered"
    assert await done_tasks(database) == {"call mom": True, "call dad": False}


async def test_a_reject_of_the_question_tells_the_model_the_user_declined(
    database: Database,
) -> None:
    graph, _ = await setup(database, AmbiguousTitleModel())

    result = await graph.ainvoke(
        decisions({"type": "reject", "message": "not telling"}), ASK_CONFIG
    )

    (answer,) = [
        m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == "ask_user"
    ]
    assert answer.content == "The user declined to answer: not telling"


async def test_an_edit_without_an_answer_asks_again(database: Database) -> None:
    graph, _ = await setup(database, AmbiguousTitleModel())

    again = await graph.ainvoke(
        decisions({"type": "edit", "edited_action": {"name": "ask_user", "args": {"answer": " "}}}),
        ASK_CONFIG,
    )

    (pause,) = again["__interrupt__"]
    assert '"edit" needs the answer' in pause.value["error"]
    assert await done_tasks(database) == {"call mom": False, "call dad": False}


async def test_agent_chat_uis_reply_with_a_placeholder_answers_the_question_in_the_turn(
    database: Database,
) -> None:
    """agent-chat-ui closes the open ``ask_user`` call with a placeholder tool message, then
    sends the reply, in one new run: the reply is the answer, the row is completed."""
    graph, _ = await setup(database, AmbiguousTitleModel())
    state = await graph.aget_state(ASK_CONFIG)
    asking = state.values["messages"][-1]
    placeholder = ToolMessage(
        content="Successfully handled tool call.",
        tool_call_id=asking.tool_calls[0]["id"],
        name="ask_user",
        id="do-not-render-0b7c",
    )

    result = await graph.ainvoke(
        {"messages": [placeholder, HumanMessage(content="call dad")]}, ASK_CONFIG
    )

    assert result["turnStatus"] == "answered"
    assert result["turnId"] == "ask-turn"
    assert [row["status"] for row in result["todos"]] == ["completed"]
    assert await done_tasks(database) == {"call mom": False, "call dad": True}
    assert not [m for m in result["messages"] if (m.id or "").startswith("do-not-render-")]
    (answer,) = [
        m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == "ask_user"
    ]
    assert answer.content == "call dad"
