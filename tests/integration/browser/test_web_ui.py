"""turnplan's web UI (``ui/``) in headless Chromium against ``langgraph dev`` (issue 28 §4).

The model is the scripted OpenAI-compatible server, so ChatOpenAI speaks real HTTP and every
reply is known; the browser is Debian's ``chromium`` driven by Playwright. Opt-in (marker
``browser``): it needs the ``browser`` extra, ``/usr/bin/chromium`` and ``npm ci`` in ``ui/``::

    TURNPLAN_BROWSER=1 pytest -m browser tests/integration/browser -q

Screenshots of each step go to ``docs/`` (README shows them).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.dev_server import REPO, DevServer, copy_project, run_dev_server
from tests.fakes import plan_rows
from tests.http_oracle import HttpPlanOracle, plan_view_of
from tests.scripted_openai import Reply, ScriptedOpenAIServer, text, tool_calls

ENABLED = os.environ.get("TURNPLAN_BROWSER") == "1"
CHROMIUM = Path(os.environ.get("TURNPLAN_CHROMIUM", "/usr/bin/chromium"))
UI = REPO / "ui"
DOCS = REPO / "docs"
TIMEOUT_MS = 60_000

pytestmark = [
    pytest.mark.integration,
    pytest.mark.browser,
    pytest.mark.skipif(
        not ENABLED,
        reason="browser tests are opt-in: install the 'browser' extra and chromium, run "
        "`npm ci` in ui/, then set TURNPLAN_BROWSER=1",
    ),
]

TITLES = ["Add 'buy groceries'", "Add 'do laundry'", "Add 'call mom'"]
REQUEST = "Add three tasks for Saturday: buy groceries, do laundry, call mom."


def _built_ui() -> None:
    """Build ``ui/dist`` when it is missing or older than the sources (``npm run build``)."""
    assert (UI / "node_modules").is_dir(), "run `npm ci` in ui/ first"
    built = UI / "dist" / "index.html"
    sources = [*UI.glob("src/*"), UI / "index.html", UI / "vite.config.ts", UI / "package.json"]
    if built.exists() and all(s.stat().st_mtime < built.stat().st_mtime for s in sources):
        return
    subprocess.run(["npm", "run", "build"], cwd=UI, check=True, capture_output=True, timeout=600)


def _free_port() -> int:
    import socket

    with closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def ui_server(dev_server: DevServer) -> Iterator[str]:
    """README's ``npm run serve`` in ui/, proxying /api to the dev server; its URL."""
    _built_ui()
    port = _free_port()
    env = {**os.environ, "TURNPLAN_API_URL": dev_server.url, "TURNPLAN_UI_PORT": str(port)}
    log = dev_server.folder / "ui.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            ["npm", "run", "serve"],
            cwd=UI,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert process.poll() is None, log.read_text()
            try:
                if httpx.get(url, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.25)
        else:
            raise AssertionError(f"the UI server did not start:\n{log.read_text()}")
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)


@pytest.fixture
def page(ui_server: str) -> Iterator[Any]:
    """A headless Chromium page (Playwright) on the UI."""
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: apt-get install -y chromium"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
        )
        try:
            context = browser.new_context(viewport={"width": 1200, "height": 760})
            page = context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(ui_server)
            yield page
        finally:
            browser.close()


def _rows(server: DevServer) -> list[tuple[str, str, str | None]]:
    with closing(sqlite3.connect(server.database)) as connection:
        return connection.execute(
            "SELECT title, status, outcome FROM turn_todos ORDER BY priority"
        ).fetchall()


def _send(page: Any, message: str) -> None:
    page.get_by_label("Message").fill(message)
    page.get_by_label("Message").press("Enter")


def test_a_plan_is_approved_worked_and_answered_in_the_browser(
    dev_server: DevServer, page: Any
) -> None:
    from playwright.sync_api import expect

    dev_server.model.respond_with(
        HttpPlanOracle(TITLES, lambda title: ("add_task", {"title": title.split("'")[1]}))
    )
    _send(page, REQUEST)

    approval = page.get_by_test_id("approval")
    expect(approval).to_contain_text("Approve this plan?")
    for title in TITLES:
        expect(approval).to_contain_text(title)
    rows = page.get_by_test_id("plan-row")
    expect(rows).to_have_count(3)
    page.screenshot(path=str(DOCS / "ui-approval.png"))
    # Nothing of the plan was done before the approval: the first action waits (NOT_RUN).
    assert [(title, status) for title, status, _ in _rows(dev_server)] == [
        (TITLES[0], "in_progress"),
        (TITLES[1], "pending"),
        (TITLES[2], "pending"),
    ]

    approval.get_by_role("button", name="Approve").click()
    expect(page.get_by_test_id("turn-status")).to_contain_text("Turn: answered")
    expect(page.get_by_test_id("turn-status")).to_contain_text("LLM calls")
    expect(approval).to_have_count(0)
    for index in range(3):
        expect(rows.nth(index)).to_have_attribute("data-status", "completed")
    expect(page.get_by_test_id("assistant-message").last).to_contain_text("All done.")
    page.screenshot(path=str(DOCS / "ui-answered.png"))

    assert _rows(dev_server) == [(t, "completed", f"did {t}") for t in TITLES]


DAYS = ["Saturday", "Sunday"]


def asking_model(body: dict[str, Any]) -> Reply:
    """Plans two items, asks which day while working on the first, and notes the answer as its
    outcome; then closes the second and answers with the day."""
    rows = plan_rows(plan_view_of(body))
    if not rows:
        return tool_calls(
            ("create_todo", {"items": [{"title": "Pick the day"}, {"title": "Book the table"}]})
        )
    current = next((row for row in rows if row.mark == ">"), None)
    if current is None:
        return text("Booked for Sunday.")
    last = (body.get("messages") or [])[-1]
    if current.title == "Pick the day" and last.get("role") != "tool":
        return tool_calls(("ask_user", {"question": "Which day?", "options": DAYS}))
    answer = str(last.get("content") or "") if last.get("role") == "tool" else "booked"
    return tool_calls(("complete_todo", {"todoId": current.id, "outcome": answer}))


def test_a_question_is_answered_from_its_form_in_the_same_turn(
    dev_server: DevServer, page: Any
) -> None:
    from playwright.sync_api import expect

    dev_server.model.respond_with(asking_model)
    page.get_by_label("Ask me to approve each plan").uncheck()
    _send(page, "Book a table this weekend.")

    question = page.get_by_test_id("question")
    expect(question).to_contain_text("Which day?")
    rows = page.get_by_test_id("plan-row")
    expect(rows.first).to_have_attribute("data-status", "in_progress")
    page.screenshot(path=str(DOCS / "ui-question.png"))

    question.get_by_role("button", name="Sunday").click()
    expect(page.get_by_test_id("turn-status")).to_contain_text("Turn: answered")
    expect(question).to_have_count(0)
    expect(page.get_by_test_id("assistant-message").last).to_contain_text("Booked for Sunday.")
    # One turn: the answer closed the row the question was asked for.
    rows_now = _rows(dev_server)
    assert [(t, s) for t, s, _ in rows_now] == [
        ("Pick the day", "completed"),
        ("Book the table", "completed"),
    ]
    assert "Sunday" in str(rows_now[0][2])
    with closing(sqlite3.connect(dev_server.database)) as connection:
        (turns,) = connection.execute("SELECT COUNT(*) FROM turns").fetchone()
    assert turns == 1


def test_the_dev_server_serves_the_plan_card_component(
    tmp_path: Path, scripted_openai: ScriptedOpenAIServer
) -> None:
    """``langgraph dev --config langgraph.ui.json`` bundles ``ui/src/PlanCard.tsx`` (langgraph-api
    runs ``npx @langchain/langgraph-ui``: node and the npm registry) and serves the ``plan``
    component agent-chat-ui loads for the card."""
    folder = copy_project(tmp_path / "project")
    (folder / "ui" / "node_modules").symlink_to(UI / "node_modules")
    with run_dev_server(
        folder, scripted_openai, extra_args=["--config", "langgraph.ui.json"]
    ) as server:
        deadline = time.monotonic() + 240
        bundle = folder / ".langgraph_api" / "ui" / "public" / "supervisor" / "entrypoint.js"
        while not bundle.exists() and time.monotonic() < deadline:
            time.sleep(1)
        assert bundle.exists(), server.log_tail()
        page = httpx.post(f"{server.url}/ui/supervisor", json={"name": "plan"}, timeout=10)
        assert page.status_code == 200
        assert "/ui/supervisor/entrypoint.js" in page.text and "plan" in page.text
        script = httpx.get(f"{server.url}/ui/supervisor/entrypoint.js", timeout=10)
        assert script.status_code == 200 and "Plan: " in script.text


def _task(title: str) -> str:
    """The personal task a row of the plan adds: the quoted part of its title."""
    return title.split("'")[1] if "'" in title else title


def _added(body: dict[str, Any]) -> set[str]:
    """The tasks the history shows added (an ``add_task`` call whose result is no error: one
    refused before the approval, ``NOT_RUN``, was not)."""
    calls: dict[str, dict[str, Any]] = {}
    added: set[str] = set()
    for message in body.get("messages") or []:
        for call in message.get("tool_calls") or []:
            calls[call["id"]] = call["function"]
        function = calls.get(str(message.get("tool_call_id")))
        is_result = message.get("role") == "tool" and function is not None
        if (
            is_result
            and function["name"] == "add_task"
            and '"error"' not in str(message["content"])
        ):
            added.add(json.loads(function["arguments"])["title"])
    return added


def one_step_oracle(body: dict[str, Any]) -> Reply:
    """Plans ``TITLES``; then, for the row in progress, whatever its title is now (the user may
    have edited or added it), adds its task unless it was added, else closes the row; answers
    when nothing is open. An action refused before the approval is made again."""
    rows = plan_rows(plan_view_of(body))
    if not rows:
        return tool_calls(("create_todo", {"items": [{"title": t} for t in TITLES]}))
    current = next((row for row in rows if row.mark == ">"), None)
    if current is None:
        return text("All done.")
    if _task(current.title) not in _added(body):
        return tool_calls(("add_task", {"title": _task(current.title)}))
    return tool_calls(("complete_todo", {"todoId": current.id, "outcome": f"did {current.title}"}))


def _tasks(server: DevServer) -> list[str]:
    with closing(sqlite3.connect(server.database)) as connection:
        found = connection.execute("SELECT title FROM tasks ORDER BY rowid")
        return [title for (title,) in found.fetchall()]


def _audited_arguments(server: DevServer, tool: str) -> list[str]:
    with closing(sqlite3.connect(server.database)) as connection:
        found = connection.execute(
            "SELECT arguments FROM tool_audit WHERE tool_name = ? ORDER BY id", (tool,)
        )
        return [arguments for (arguments,) in found.fetchall()]


def _paused_for_approval(server: DevServer, page: Any) -> tuple[Any, Any]:
    """Sends the request and waits for the plan approval; the approval box and the plan rows."""
    from playwright.sync_api import expect

    server.model.respond_with(one_step_oracle)
    _send(page, REQUEST)
    approval = page.get_by_test_id("approval")
    expect(approval).to_contain_text("Approve this plan?")
    rows = page.get_by_test_id("plan-row")
    expect(rows).to_have_count(3)
    return approval, rows


def test_a_row_cancelled_at_the_approval_with_a_reason_is_never_done(
    dev_server: DevServer, page: Any
) -> None:
    from playwright.sync_api import expect

    approval, rows = _paused_for_approval(dev_server, page)
    calls_before = len(dev_server.model.requests)

    rows.nth(1).get_by_role("button", name="Cancel", exact=True).click()
    rows.nth(1).get_by_label("Cancel reason").fill("did it yesterday")
    rows.nth(1).get_by_role("button", name="Cancel row").click()
    expect(rows.nth(1)).to_have_attribute("data-status", "cancelled")
    expect(rows.nth(1)).to_contain_text("Cancelled by the user: did it yesterday")
    expect(approval).to_contain_text("Approve this plan?")  # asked again, without the row
    expect(approval).not_to_contain_text(TITLES[1])
    # The edit made no LLM call.
    assert len(dev_server.model.requests) == calls_before

    approval.get_by_role("button", name="Approve").click()
    expect(page.get_by_test_id("turn-status")).to_contain_text("Turn: answered")
    assert _rows(dev_server) == [
        (TITLES[0], "completed", f"did {TITLES[0]}"),
        (TITLES[1], "cancelled", "Cancelled by the user: did it yesterday"),
        (TITLES[2], "completed", f"did {TITLES[2]}"),
    ]
    # The cancelled row's task was never added, nor even tried.
    assert _tasks(dev_server) == ["buy groceries", "call mom"]
    added = _audited_arguments(dev_server, "add_task")
    assert len(added) == 2 and not any("do laundry" in arguments for arguments in added)


def test_a_plan_edited_at_the_approval_is_done_as_edited(dev_server: DevServer, page: Any) -> None:
    from playwright.sync_api import expect

    approval, rows = _paused_for_approval(dev_server, page)

    approval.get_by_role("button", name="Edit").click()
    items = approval.get_by_label("Plan items, one a line")
    expect(items).to_have_value("\n".join(TITLES))
    items.fill("\n".join([TITLES[0], "Add 'wash the car'", TITLES[2]]))
    approval.get_by_role("button", name="Save and approve").click()

    expect(page.get_by_test_id("turn-status")).to_contain_text("Turn: answered")
    expect(approval).to_have_count(0)
    expect(rows).to_have_count(3)
    expect(rows.nth(1)).to_contain_text("Add 'wash the car'")
    assert _rows(dev_server) == [
        (TITLES[0], "completed", f"did {TITLES[0]}"),
        ("Add 'wash the car'", "completed", "did Add 'wash the car'"),
        (TITLES[2], "completed", f"did {TITLES[2]}"),
    ]
    assert _tasks(dev_server) == ["buy groceries", "wash the car", "call mom"]


def test_a_row_added_at_the_approval_is_done_with_no_llm_call_for_the_edit(
    dev_server: DevServer, page: Any
) -> None:
    from playwright.sync_api import expect

    approval, rows = _paused_for_approval(dev_server, page)
    calls_before = len(dev_server.model.requests)

    page.get_by_label("New row").fill("Add 'water the plants'")
    page.get_by_role("button", name="Add", exact=True).click()
    expect(rows).to_have_count(4)
    expect(rows.nth(3)).to_contain_text("Add 'water the plants'")
    expect(rows.nth(3)).to_have_attribute("data-status", "pending")
    expect(approval).to_contain_text("Add 'water the plants'")  # asked again, with the new row
    expect(page.get_by_test_id("plan-card")).to_contain_text("Plan: 0/4 done")
    assert len(dev_server.model.requests) == calls_before  # the edit made no LLM call

    approval.get_by_role("button", name="Approve").click()
    expect(page.get_by_test_id("turn-status")).to_contain_text("Turn: answered")
    expect(rows.nth(3)).to_have_attribute("data-status", "completed")
    assert _rows(dev_server)[3] == (
        "Add 'water the plants'",
        "completed",
        "did Add 'water the plants'",
    )
    assert [status for _, status, _ in _rows(dev_server)] == ["completed"] * 4
    assert _tasks(dev_server) == ["buy groceries", "do laundry", "call mom", "water the plants"]


def _adding_oracle() -> HttpPlanOracle:
    return HttpPlanOracle(TITLES, lambda title: ("add_task", {"title": title.split("'")[1]}))


def test_a_rejected_plan_is_cancelled_with_the_reason(dev_server: DevServer, page: Any) -> None:
    from playwright.sync_api import expect

    dev_server.model.respond_with(_adding_oracle())
    _send(page, REQUEST)
    approval = page.get_by_test_id("approval")
    expect(approval).to_contain_text("Approve this plan?")
    approval.get_by_label("Reason").fill("not this weekend")
    approval.get_by_role("button", name="Reject").click()
    expect(page.get_by_test_id("turn-status")).to_contain_text("Turn: answered")
    expect(approval).to_have_count(0)
    rows = _rows(dev_server)
    assert [(t, s) for t, s, _ in rows] == [(t, "cancelled") for t in TITLES]
    assert all("not this weekend" in str(outcome) for _, _, outcome in rows)
