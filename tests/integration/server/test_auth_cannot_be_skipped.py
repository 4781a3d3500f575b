"""With ``TURNPLAN_AUTH_TOKENS`` set, no header a client sends gets it past authentication on
``langgraph dev``: every route family refuses a request with no headers, with Studio's
``x-auth-scheme: langsmith`` (which langgraph-api hands to a no-op Studio backend unless
``langgraph.json`` says ``disable_studio_auth``), or with a wrong token, and serves a valid token;
so do langgraph-api's MCP and A2A endpoints.
``langgraph dev``'s own routes outside authentication (``/internal/*``, ``/deploy``) are refused
to everyone. A second server runs with ``disable_studio_auth`` left out of ``langgraph.json`` and
shows the ownership rules still refuse the Studio header: no data, no run, no action as another
user. Without tokens, Studio and plain clients keep the open server."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.dev_server import DevServer, copy_project, run_dev_server
from tests.scripted_openai import Reply, ScriptedOpenAIServer, text, tool_calls

pytestmark = pytest.mark.integration

TOKENS = {"tok-alice": "alice", "tok-bob": "bob"}
ALICE = {"Authorization": "Bearer tok-alice"}
STUDIO = {"x-auth-scheme": "langsmith"}
REFUSED_HEADERS = {
    "no headers": {},
    "studio header": STUDIO,
    "wrong token": {"Authorization": "Bearer tok-mallory"},
    "studio header and wrong token": {**STUDIO, "Authorization": "Bearer tok-mallory"},
    "not a bearer token": {"Authorization": "Basic dG9rLWFsaWNlOg=="},
}
TOKEN_HANDLER_REFUSAL = "Send Authorization: Bearer <token> with a known token."
"""What the authenticate handler answers: seeing it proves the handler saw the request."""
REQUEST = {"messages": [{"role": "user", "content": "Add milk to my tasks"}]}


@dataclass(frozen=True)
class Probe:
    """One request of a route family; ``{thread}`` and ``{assistant}`` in the path are filled
    in with Alice's thread and the supervisor assistant."""

    family: str
    method: str
    path: str
    body: dict[str, Any] | None = None
    accept: str = "application/json"

    def send(self, client: httpx.Client, ids: dict[str, str], headers: dict[str, str]) -> Any:
        return client.request(
            self.method,
            self.path.format(**ids),
            json=self.body,
            headers={"Accept": self.accept, **headers},
        )


PROBES = [
    Probe("assistants", "POST", "/assistants/search", {}),
    Probe("assistants", "GET", "/assistants/{assistant}"),
    Probe("assistants", "POST", "/assistants", {"graph_id": "supervisor"}),
    Probe("threads", "POST", "/threads", {}),
    Probe("threads", "POST", "/threads/search", {}),
    Probe("threads", "GET", "/threads/{thread}"),
    Probe("threads", "GET", "/threads/{thread}/state"),
    Probe("threads", "POST", "/threads/{thread}/history", {}),
    Probe("runs", "GET", "/threads/{thread}/runs"),
    Probe(
        "runs",
        "POST",
        "/threads/{thread}/runs/wait",
        {"assistant_id": "supervisor", "input": REQUEST},
    ),
    Probe(
        "runs",
        "POST",
        "/runs/wait",
        {"assistant_id": "supervisor", "input": REQUEST, "context": {"user_id": "alice"}},
    ),
    Probe("crons", "POST", "/runs/crons/search", {}),
    Probe(
        "store",
        "PUT",
        "/store/items",
        {"namespace": ["alice", "notes"], "key": "k", "value": {"text": "x"}},
    ),
    Probe("store", "POST", "/store/items/search", {"namespace_prefix": ["alice", "notes"]}),
]
PROTOCOL_PROBES = [
    Probe(
        "mcp",
        "POST",
        "/mcp",
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        accept="application/json, text/event-stream",
    ),
    Probe(
        "a2a",
        "POST",
        "/a2a/{assistant}",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "message/send",
            "params": {
                "message": {
                    "role": "user",
                    "parts": [{"kind": "text", "text": "hi"}],
                    "messageId": "m1",
                }
            },
        },
    ),
]
"""langgraph-api's MCP and A2A endpoints: other doors to the same assistants, threads and runs."""
DEV_ONLY_PROBES = [
    Probe("dev routes", "GET", "/internal/debug/thread/{thread}"),
    Probe("dev routes", "POST", "/internal/truncate"),
    Probe("dev routes", "GET", "/deploy"),
]


def answer_everything(_: dict[str, Any]) -> Reply:
    return text("Done.")


def start_server(
    folder: Path, model: ScriptedOpenAIServer, *, studio_auth_disabled: bool
) -> Iterator[DevServer]:
    """``langgraph dev`` with two tokens; with the project's ``langgraph.json`` unchanged, or
    with ``disable_studio_auth`` taken out of its ``auth`` section."""
    config_path = folder / "langgraph.json"
    config = json.loads(config_path.read_text())
    assert config["auth"]["disable_studio_auth"] is True, "the project must close Studio's door"
    if not studio_auth_disabled:
        del config["auth"]["disable_studio_auth"]
        config_path.write_text(json.dumps(config))
    env = {"TURNPLAN_AUTH_TOKENS": json.dumps(TOKENS)}
    with run_dev_server(folder, model, extra_env=env) as running:
        yield running


@pytest.fixture
def closed_server(tmp_path: Path, scripted_openai: ScriptedOpenAIServer) -> Iterator[DevServer]:
    folder = copy_project(tmp_path / "project")
    yield from start_server(folder, scripted_openai, studio_auth_disabled=True)


@pytest.fixture
def server_without_the_flag(
    tmp_path: Path, scripted_openai: ScriptedOpenAIServer
) -> Iterator[DevServer]:
    folder = copy_project(tmp_path / "project")
    yield from start_server(folder, scripted_openai, studio_auth_disabled=False)


def alices_thread(client: httpx.Client, server: DevServer) -> dict[str, str]:
    """Alice adds milk to her tasks in a thread of her own; the ids the probes fill in."""
    server.model.reply(tool_calls(("add_task", {"title": "milk"})), text("Added."))
    thread = client.post("/threads", json={}, headers=ALICE).json()
    done = client.post(
        f"/threads/{thread['thread_id']}/runs/wait",
        json={"assistant_id": "supervisor", "input": REQUEST},
        headers=ALICE,
    )
    assert done.status_code == 200 and done.json()["turnStatus"] == "answered", server.log_tail()
    assistants = client.post("/assistants/search", json={}, headers=ALICE).json()
    return {"thread": thread["thread_id"], "assistant": assistants[0]["assistant_id"]}


def task_rows(server: DevServer) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(server.database)) as connection:
        return connection.execute("SELECT user_id, title FROM tasks ORDER BY id").fetchall()


def test_every_route_wants_a_valid_token_whatever_else_is_sent(closed_server: DevServer) -> None:
    with httpx.Client(base_url=closed_server.url, timeout=60) as client:
        ids = alices_thread(client, closed_server)
        model_calls = len(closed_server.model.requests)

        for probe in PROBES + PROTOCOL_PROBES + DEV_ONLY_PROBES:
            for name, headers in REFUSED_HEADERS.items():
                response = probe.send(client, ids, headers)
                assert response.status_code in (401, 403), (probe, name, response.text)
                assert ids["thread"] not in response.text, (probe, name)
        handled = client.post("/threads/search", json={}, headers=STUDIO)
        assert handled.json()["detail"] == TOKEN_HANDLER_REFUSAL, "Studio's header skipped it"
        assert len(closed_server.model.requests) == model_calls, "a refused run reached the model"
        assert task_rows(closed_server) == [("alice", "milk")]

        closed_server.model.respond_with(answer_everything)
        for probe in PROBES + PROTOCOL_PROBES:
            response = probe.send(client, ids, ALICE)
            assert response.is_success, (probe, response.status_code, response.text)
        for probe in DEV_ONLY_PROBES:
            refused = probe.send(client, ids, ALICE)
            assert refused.status_code == 403, (probe, refused.text)
            assert "TURNPLAN_AUTH_TOKENS" in refused.json()["detail"]
        assert client.get(f"/threads/{ids['thread']}", headers=ALICE).is_success, (
            "a dev route wiped the threads"
        )


def test_without_disable_studio_auth_the_studio_header_still_gets_nothing(
    server_without_the_flag: DevServer,
) -> None:
    server = server_without_the_flag
    with httpx.Client(base_url=server.url, timeout=60) as client:
        ids = alices_thread(client, server)
        model_calls = len(server.model.requests)
        server.model.reply(tool_calls(("add_task", {"title": "bread"})), text("Added."))

        search = client.post("/threads/search", json={}, headers=STUDIO)
        assert search.status_code == 401, search.text
        assert "x-auth-scheme" in search.json()["detail"]
        for probe in PROBES:
            response = probe.send(client, ids, STUDIO)
            assert response.status_code in (401, 403), (probe, response.text)
            assert ids["thread"] not in response.text, probe

        as_alice = client.post(
            "/runs/wait",
            json={"assistant_id": "supervisor", "input": REQUEST, "context": {"user_id": "alice"}},
            headers=STUDIO,
        )
        assert as_alice.status_code == 401, as_alice.text
        assert len(server.model.requests) == model_calls, (
            "the Studio header's run reached the model"
        )
        assert task_rows(server) == [("alice", "milk")]

        mine = client.post("/threads/search", json={}, headers=ALICE)
        assert [thread["thread_id"] for thread in mine.json()] == [ids["thread"]]


def test_without_tokens_studio_and_plain_clients_use_the_open_server(dev_server: DevServer) -> None:
    with httpx.Client(base_url=dev_server.url, timeout=60) as client:
        created = client.post("/threads", json={}, headers=STUDIO)
        assert created.status_code == 200, created.text
        found = client.post("/threads/search", json={}, headers={})
        assert [thread["thread_id"] for thread in found.json()] == [created.json()["thread_id"]]
        assert client.get("/deploy").status_code != 403, "dev routes stay on the open server"
