"""Web pages on other sites cannot drive ``langgraph dev`` started as README says (no tokens),
checked with raw HTTP as a browser would send it.

A page at https://evil.example can send a ``text/plain`` POST without a preflight: it must not
create a thread or start a run, and no reply may carry ``Access-Control-Allow-Origin`` for it
(not for a read, not for a preflight). The origins a user does use (LangGraph Studio at
LangSmith, the web UI of ``ui/`` on its dev port) still get their CORS answers and can run,
and ``CORS_CONFIG`` in the environment replaces the list.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.dev_server import DevServer, copy_project, run_dev_server
from tests.scripted_openai import ScriptedOpenAIServer, text

pytestmark = pytest.mark.integration

EVIL = "https://evil.example"
STUDIO = "https://smith.langchain.com"
WEB_UI = "http://127.0.0.1:5173"
RUN = {
    "assistant_id": "supervisor",
    "input": {"messages": [{"role": "user", "content": "Say hello"}]},
}
ACAO = "access-control-allow-origin"


def preflight(server: DevServer, origin: str, path: str = "/threads") -> httpx.Response:
    return httpx.options(
        f"{server.url}{path}",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
    )


def simple_post(server: DevServer, path: str, body: object, origin: str = EVIL) -> httpx.Response:
    """What ``fetch(url, {method: "POST", body: JSON.stringify(body), mode: "no-cors"})`` sends
    from a page at ``origin``: a text/plain body, no preflight."""
    return httpx.post(
        f"{server.url}{path}",
        content=json.dumps(body),
        headers={"Origin": origin, "Content-Type": "text/plain;charset=UTF-8"},
        timeout=30,
    )


def thread_count(server: DevServer) -> int:
    found = httpx.post(f"{server.url}/threads/search", json={"limit": 100}).json()
    return len(found)


def test_a_foreign_page_cannot_create_threads_start_runs_or_read_replies(
    dev_server: DevServer,
) -> None:
    mine = httpx.post(f"{dev_server.url}/threads", json={}).json()["thread_id"]
    threads_before = thread_count(dev_server)

    attempts = {
        "create a thread": simple_post(dev_server, "/threads", {}),
        "start a stateless run": simple_post(dev_server, "/runs/wait", RUN),
        "run on a thread": simple_post(dev_server, f"/threads/{mine}/runs/wait", RUN),
        "wipe every thread": httpx.post(
            f"{dev_server.url}/internal/truncate", headers={"Origin": EVIL}
        ),
        "a JSON body": httpx.post(f"{dev_server.url}/threads", json={}, headers={"Origin": EVIL}),
    }
    for action, response in attempts.items():
        assert response.status_code in (403, 415), (action, response.status_code, response.text)
        assert ACAO not in response.headers, action
    assert attempts["create a thread"].json()["error"] == "VALIDATION_ERROR"
    assert attempts["wipe every thread"].json()["error"] == "FOREIGN_ORIGIN"
    assert thread_count(dev_server) == threads_before
    assert dev_server.model.requests == [], "a foreign page's run reached the model"

    refused_preflight = preflight(dev_server, EVIL)
    assert ACAO not in refused_preflight.headers
    read = httpx.get(f"{dev_server.url}/threads/{mine}", headers={"Origin": EVIL})
    assert read.status_code == 200 and ACAO not in read.headers


def test_a_text_plain_body_is_refused_even_without_an_origin(dev_server: DevServer) -> None:
    response = httpx.post(
        f"{dev_server.url}/threads", content="{}", headers={"Content-Type": "text/plain"}
    )
    assert response.status_code == 415
    assert "application/json" in response.json()["detail"]
    assert thread_count(dev_server) == 0


@pytest.mark.parametrize("origin", [STUDIO, WEB_UI, "http://localhost:5173"])
def test_studio_and_the_web_ui_still_run_from_their_origins(
    dev_server: DevServer, origin: str
) -> None:
    allowed = preflight(dev_server, origin, "/runs/wait")
    assert allowed.status_code == 200
    assert allowed.headers[ACAO] == origin
    dev_server.model.reply(text("Hello."))
    final = httpx.post(
        f"{dev_server.url}/runs/wait", json=RUN, headers={"Origin": origin}, timeout=60
    )
    assert final.status_code == 200, final.text
    assert final.headers[ACAO] == origin
    assert final.json()["messages"][-1]["content"] == "Hello."


def test_only_the_apis_own_page_on_a_loopback_address_counts_as_its_own_origin(
    dev_server: DevServer,
) -> None:
    own = httpx.post(f"{dev_server.url}/threads", json={}, headers={"Origin": dev_server.url})
    assert own.status_code == 200, own.text
    # A foreign name resolved to 127.0.0.1 (DNS rebinding) sends its own Host and Origin.
    port = dev_server.url.rsplit(":", 1)[1]
    rebound = httpx.post(
        f"{dev_server.url}/threads",
        json={},
        headers={"Origin": f"http://evil.example:{port}", "Host": f"evil.example:{port}"},
    )
    assert rebound.status_code == 403, rebound.text
    assert thread_count(dev_server) == 1


@pytest.fixture
def configured_server(tmp_path: Path, scripted_openai: ScriptedOpenAIServer) -> Iterator[DevServer]:
    folder = copy_project(tmp_path / "project")
    env = {"CORS_CONFIG": json.dumps({"allow_origins": ["https://ui.example"]})}
    with run_dev_server(folder, scripted_openai, extra_env=env) as running:
        yield running


def test_cors_config_in_the_environment_replaces_the_allowed_origins(
    configured_server: DevServer,
) -> None:
    ours = httpx.post(
        f"{configured_server.url}/threads", json={}, headers={"Origin": "https://ui.example"}
    )
    assert ours.status_code == 200 and ours.headers[ACAO] == "https://ui.example"
    studio = httpx.post(f"{configured_server.url}/threads", json={}, headers={"Origin": STUDIO})
    assert studio.status_code == 403 and ACAO not in studio.headers
