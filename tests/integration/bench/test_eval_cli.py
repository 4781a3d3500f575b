"""``python -m bench.eval`` for real: every system, over HTTP against the scripted OpenAI server,
on four requests whose end state the checks read from the database and the conversation's task
file, with a scripted model that does three of them right and one wrong (a task added twice),
which must be reported as failed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench.eval.cli import main
from bench.eval.systems import COMPARED_SYSTEMS
from bench.wire import calls_of, turn_messages
from tests.fakes import plan_rows, plan_view
from tests.scripted_openai import Reply, ScriptedOpenAIServer, text, tool_calls

Action = tuple[str, dict[str, Any]]

TWO_AND_SHOW = "Add 'buy groceries' and 'book a dentist' to my tasks, then show me what is left."

REQUESTS = {
    "requests": [
        {
            "id": "add-one",
            "kind": "single-item",
            "request": "Add 'call mom' to my tasks.",
            "items": 1,
            "expect": {"personal": {"open": ["call mom"], "done": []}, "plan": "none"},
        },
        {
            "id": "add-two-show",
            "kind": "mixed add/list",
            "request": TWO_AND_SHOW,
            "items": 3,
            "setup": {"personal": [{"title": "water the plants"}]},
            "expect": {
                "personal": {
                    "open": ["water the plants", "buy groceries", "book a dentist"],
                    "done": [],
                },
                "answer_mentions": ["water the plants", "buy groceries", "book a dentist"],
            },
        },
        {
            "id": "conversation-add",
            "kind": "conversation task file",
            "request": "Put 'draft the outline' on this conversation's task list.",
            "items": 1,
            "toolsets": ["conversation_tasks"],
            "setup": {"conversation": [{"title": "pick a topic", "done": True}]},
            "expect": {"conversation": {"open": ["draft the outline"], "done": ["pick a topic"]}},
        },
        {
            "id": "add-twice",
            "kind": "single-item",
            "request": "Add 'call dad' to my tasks.",
            "items": 1,
            "expect": {"personal": {"open": ["call dad"], "done": []}},
        },
    ]
}

SCRIPTS: dict[str, tuple[list[Action], str]] = {
    "Add 'call mom' to my tasks.": ([("add_task", {"title": "call mom"})], "Added 'call mom'."),
    TWO_AND_SHOW: (
        [
            ("add_task", {"title": "buy groceries"}),
            ("add_task", {"title": "book a dentist"}),
            ("list_tasks", {}),
        ],
        "Left: water the plants, buy groceries, book a dentist.",
    ),
    "Put 'draft the outline' on this conversation's task list.": (
        [("AddTask", {"title": "draft the outline"})],
        "Added it.",
    ),
    # The wrong run: the same task twice.
    "Add 'call dad' to my tasks.": (
        [("add_task", {"title": "call dad"}), ("add_task", {"title": "call dad"})],
        "Added 'call dad'.",
    ),
}


def _request_text(body: dict[str, Any]) -> str:
    for message in body.get("messages") or []:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str):
            for request in SCRIPTS:
                if request in content:
                    return request
    raise AssertionError(f"no scripted request in {body.get('messages')}")


@dataclass
class SuiteOracle:
    """Does each request's scripted actions along the path of the system it is sent to: with a
    forced ``create_todo``, one plan item per action worked one at a time (turnplan-always);
    otherwise the actions in turn, no plan, then the answer (turnplan-auto, -off, todolist).
    It reads only the request body."""

    def __call__(self, body: dict[str, Any]) -> Reply:
        actions, answer = SCRIPTS[_request_text(body)]
        forced = ((body.get("tool_choice") or {}).get("function") or {}).get("name")
        rows = plan_rows(plan_view(body.get("messages") or []))
        if forced == "create_todo":
            titles = [f"{name} {args.get('title', '')}".strip() for name, args in actions]
            return tool_calls(
                ("create_todo", {"items": [{"title": title} for title in titles]}), actions[0]
            )
        if rows:
            current = next((row for row in rows if row.mark == ">"), None)
            if current is None:
                return text(answer)
            calls: list[Action] = [("complete_todo", {"todoId": current.id, "outcome": "done"})]
            position = [row.title for row in rows].index(current.title)
            if position + 1 < len(actions):
                calls.append(actions[position + 1])
            return tool_calls(*calls)
        done = sum(
            len(calls_of(message))
            for message in turn_messages(body)
            if message.get("role") == "assistant"
        )
        return tool_calls(actions[done]) if done < len(actions) else text(answer)


def test_the_cli_runs_every_system_and_reports_a_wrong_end_state_as_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    requests_file = tmp_path / "requests.json"
    requests_file.write_text(json.dumps(REQUESTS), encoding="utf-8")
    out = tmp_path / "out"
    with ScriptedOpenAIServer() as server:
        server.respond_with(SuiteOracle())
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        code = main(
            [
                "--model",
                "openai:scripted",
                "--requests",
                str(requests_file),
                "--out",
                str(out),
                "--systems",
                *COMPARED_SYSTEMS,
            ]
        )
        served = len(server.requests)
        system_messages = [body["messages"][0] for body in server.requests]
    # llama.cpp's server refuses a system message in content blocks (TodoListMiddleware's form).
    assert all(m["role"] == "system" and isinstance(m["content"], str) for m in system_messages)
    assert any("write_todos" in m["content"] for m in system_messages)
    assert code == 0

    runs = json.loads((out / "results.json").read_text(encoding="utf-8"))
    by_run = {(run["system"], run["request"]): run for run in runs}
    systems = ["turnplan-auto", "turnplan-always", "turnplan-off", "todolist"]
    assert sorted(by_run) == sorted((s, r["id"]) for s in systems for r in REQUESTS["requests"])
    for system in systems:
        for request in ("add-one", "add-two-show", "conversation-add"):
            run = by_run[(system, request)]
            assert run["success"], (system, request, run["failed_checks"], run["error"])
            assert run["llm_calls"] >= 2 and run["prompt_tokens"] > 0
            assert run["completion_tokens"] > 0 and run["seconds"] > 0
        wrong = by_run[(system, "add-twice")]
        assert not wrong["success"]
        assert any("duplicate titles ['call dad']" in check for check in wrong["failed_checks"])
    # Every LLM call of every run was counted, once.
    assert sum(run["llm_calls"] for run in runs) == served
    # The plan-always system planned, the others did not.
    assert by_run[("turnplan-always", "add-two-show")]["plan_items"] == 3
    assert by_run[("turnplan-auto", "add-two-show")]["plan_items"] == 0

    report = (out / "results.md").read_text(encoding="utf-8")
    assert "| turnplan-auto | 4 | 3/4 (75 %) |" in report
    assert "| todolist | 4 | 3/4 (75 %) |" in report
    assert "- **add-twice**, turnplan-off:" in report
    assert "| add-one | 1/1 | 1/1 | 1/1 | 1/1 |" in report
    progress = capsys.readouterr().err
    assert "... 1/16 turnplan-auto add-one #1: running" in progress
    assert "] 16/16 todolist add-twice #1: FAILED (personal tasks: duplicate titles" in progress


WORKER_TITLES = ["prepare slides for Monday", "print the handouts"]


def delegating_oracle(body: dict[str, Any]) -> Reply:
    """turnplan with the tasks worker: plan one item for the worker, delegate it, close it with
    the worker's result, answer; the worker (no plan tools) adds both tasks, then answers."""
    tools = {tool["function"]["name"] for tool in body.get("tools") or []}
    messages = body["messages"]
    if "create_todo" not in tools and "complete_todo" not in tools:
        done = sum(len(calls_of(m)) for m in turn_messages(body) if m.get("role") == "assistant")
        if done < len(WORKER_TITLES):
            return tool_calls(("add_task", {"title": WORKER_TITLES[done]}))
        return text("Added both.")
    rows = plan_rows(plan_view(messages))
    if not rows:
        item = {"title": "add the two tasks", "agentType": "tasks"}
        return tool_calls(("create_todo", {"items": [item]}))
    current = next((row for row in rows if row.mark == ">"), None)
    if current is None:
        return text("Added: " + ", ".join(WORKER_TITLES))
    if messages[-1].get("role") == "tool" and "toolCalls" in str(messages[-1].get("content")):
        return tool_calls(("complete_todo", {"todoId": current.id, "outcome": "worker did it"}))
    return tool_calls(("delegate", {"todoId": current.id}))


async def test_a_worker_request_goes_through_delegate_and_its_calls_are_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench.eval.checks import failed_checks
    from bench.eval.requests import load_requests
    from bench.eval.systems import TurnplanEval, UsageCounter

    request = next(r for r in load_requests() if r.id == "worker-add-two")
    usage = UsageCounter()
    with ScriptedOpenAIServer() as server:
        server.respond_with(delegating_oracle)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        outcome = await TurnplanEval("auto").run(request, "openai:scripted", tmp_path, usage)
        bodies = list(server.requests)
    assert failed_checks(request, outcome) == []
    assert outcome.plan_items == 1
    offered = [{tool["function"]["name"] for tool in body["tools"]} for body in bodies]
    supervisor = [names for names in offered if names & {"create_todo", "complete_todo"}]
    # The supervisor had no task tools of its own: the tasks were added by the worker.
    assert len(supervisor) == 4 and not any("add_task" in names for names in supervisor)
    assert any("delegate" in names for names in supervisor)
    # 4 supervisor calls (plan, delegate, close, answer) and 3 of the worker, all counted.
    assert usage.calls == len(bodies) == 7


async def test_turnplan_audit_audits_the_planned_answer_with_its_audit_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench.eval.checks import failed_checks
    from bench.eval.requests import load_requests
    from bench.eval.systems import DEFAULT_SYSTEMS, SYSTEM_NAMES, TurnplanEval, UsageCounter

    audits: list[str] = []
    models: set[str] = set()

    def oracle(body: dict[str, Any]) -> Reply:
        prompt = str(body["messages"][-1].get("content"))
        if not body.get("tools") and prompt.startswith("You check an assistant's answer"):
            audits.append(f"{body['model']}: {prompt}")
            return text("OK")
        models.add(body["model"])
        return delegating_oracle(body)

    request = next(r for r in load_requests() if r.id == "worker-add-two")
    usage = UsageCounter()
    system = TurnplanEval("auto", audit=True, audit_model="openai:auditor")
    with ScriptedOpenAIServer() as server:
        server.respond_with(oracle)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        outcome = await system.run(request, "openai:scripted", tmp_path, usage)
    assert system.name == "turnplan-audit" and system.name in SYSTEM_NAMES
    assert system.name not in DEFAULT_SYSTEMS  # run only when named
    assert failed_checks(request, outcome) == []
    assert (outcome.turn_status, outcome.audit_calls) == ("answered", 1)
    assert outcome.audit_tokens > 0
    (audit,) = audits
    assert audit.startswith("auditor: ") and models == {"scripted"}
    assert request.text in audit and "add the two tasks" in audit
    assert usage.calls == 8  # the 7 of turnplan-auto, and the audit's


@pytest.mark.parametrize("profile", ["full", "compact"])
def test_profile_and_every_pick_the_prompt_profile_and_a_fixed_subset(
    profile: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--every 2`` runs the 1st and 3rd requests for any model; ``--profile`` is the prompt
    profile each turnplan run is given (compact: a short prompt and only the step's tools)."""
    requests_file = tmp_path / "requests.json"
    requests_file.write_text(json.dumps(REQUESTS), encoding="utf-8")
    out = tmp_path / "out"
    with ScriptedOpenAIServer() as server:
        server.respond_with(lambda body: text("Done."))
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        options = ["--profile", profile, "--every", "2", "--out", str(out)]
        code = main(["--model", "openai:scripted", "--requests", str(requests_file), *options])
        offered = [
            {tool["function"]["name"] for tool in body.get("tools") or []}
            for body in server.requests
        ]

    assert code == 0
    runs = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert [run["request"] for run in runs] == ["add-one", "conversation-add"]
    report = (out / "results.md").read_text(encoding="utf-8")
    assert f"- prompt profile: {profile}" in report
    assert "- subset: 1 request in 2, from the first (2 requests)" in report
    every_tool = {"add_task", "list_tasks", "complete_task", "create_todo", "ask_user"}
    if profile == "full":
        assert offered and every_tool <= offered[0]  # the model saw every tool at once
    else:
        assert all(not every_tool <= tools for tools in offered)  # never all of them
