"""Issue 40's request format for real, over HTTP against the scripted OpenAI server: a request's
earlier turns run on the same thread before the measured one, and a measured turn that pauses on
``ask_user`` is recorded as paused with its question (the run returns, it does not wait for an
answer), checked and counted for harm like any other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.eval.checks import TaskState, failed_checks, harm_of
from bench.eval.cli import run_one
from bench.eval.requests import EvalRequest, parse_request
from bench.eval.systems import TurnplanEval, UsageCounter
from bench.wire import assistant_calls
from tests.scripted_openai import Reply, ScriptedOpenAIServer, text, tool_calls

ADD = "Add 'call the vet'."
DONE = "Mark it done."


def follow_up(expect: dict[str, Any]) -> EvalRequest:
    return parse_request(
        "test",
        {
            "id": "follow-up",
            "kind": "follow-up",
            "class": "follow-up",
            "turns": [ADD],
            "request": DONE,
            "items": 1,
            "setup": {"personal": [{"title": "walk the dog"}]},
            "expect": expect,
        },
    )


def latest_request(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user" and message.get("content") in (ADD, DONE):
            return str(message["content"])
    raise AssertionError(f"no scripted request in {body.get('messages')}")


def oracle(measured: Reply) -> Any:
    """The earlier turn adds its task and answers; the measured turn replies ``measured`` once,
    then answers."""
    seen: list[list[str]] = []

    def respond(body: dict[str, Any]) -> Reply:
        request = latest_request(body)
        users = [m.get("content") for m in body["messages"] if m.get("role") == "user"]
        seen.append([str(u) for u in users])
        done = assistant_calls(body)
        if request == ADD:
            return (
                tool_calls(("add_task", {"title": "call the vet"})) if not done else text("Added.")
            )
        return measured if not done else text("Marked 'call the vet' done.")

    respond.seen = seen  # type: ignore[attr-defined]
    return respond


async def test_earlier_turns_run_on_the_same_thread_before_the_measured_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    request = follow_up({"personal": {"open": ["walk the dog"], "done": ["call the vet"]}})
    respond = oracle(tool_calls(("complete_task", {"task_identifier": "call the vet"})))
    with ScriptedOpenAIServer() as server:
        server.respond_with(respond)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        outcome = await TurnplanEval("auto").run(
            request, "openai:scripted", tmp_path, UsageCounter()
        )
    # The measured turn saw the earlier one: one thread, not two conversations.
    assert [u for u in respond.seen[-1] if u in (ADD, DONE)] == [ADD, DONE]
    assert outcome.before_personal == [
        TaskState("walk the dog", False),
        TaskState("call the vet", False),
    ]
    # Only the measured turn's answer and calls are its outcome.
    assert outcome.answer == "Marked 'call the vet' done."
    assert "complete_task" in outcome.tool_calls and "add_task" not in outcome.tool_calls
    assert not outcome.paused
    assert failed_checks(request, outcome) == [] and harm_of(request, outcome) == []


async def test_a_turn_paused_on_ask_user_is_recorded_with_its_question(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asking = {"personal": {"open": ["walk the dog", "call the vet"], "done": []}, "may_ask": True}
    request = follow_up(asking)
    question = tool_calls(("ask_user", {"question": "Which task do you mean?"}))
    with ScriptedOpenAIServer() as server:
        server.respond_with(oracle(question))
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        record = await run_one(TurnplanEval("auto"), request, "openai:scripted", 0, 60.0)
        strict = follow_up({**asking, "may_ask": False})
        refused = await run_one(TurnplanEval("auto"), strict, "openai:scripted", 0, 60.0)
    assert record.error == ""
    assert record.paused and record.answer == "Which task do you mean?"
    assert record.success and record.harm == []
    assert (record.group, record.part) == ("follow-up", "tuning")
    assert refused.paused and not refused.success and refused.harm == []
    assert refused.failed_checks == [
        "the turn paused on a question ('Which task do you mean?') where it should have acted"
    ]
