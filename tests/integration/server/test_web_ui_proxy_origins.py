"""The web UI's server (``npm run serve`` in ``ui/``) on any port can drive ``langgraph dev``,
and a foreign page cannot drive it through the UI's proxy.

The API refuses writes from origins its CORS setting does not list; the UI's proxy vouches for
its own pages on loopback addresses (it drops their ``Origin``), and passes every other
``Origin`` on, so a page at https://evil.example, or a foreign name rebound to 127.0.0.1, is
refused as it would be at the API itself. Needs ``npm ci`` in ``ui/``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import closing

import httpx
import pytest

from tests.dev_server import REPO, DevServer

UI = REPO / "ui"
VITE = UI / "node_modules" / ".bin" / "vite"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not VITE.exists(), reason="needs `npm ci` in ui/ (the UI's own server)"),
]


def _free_port() -> int:
    with closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def ui_url(dev_server: DevServer) -> Iterator[str]:
    """``npm run serve`` on a port that is not the default, proxying /api to the dev server."""
    if not (UI / "dist" / "index.html").exists():
        subprocess.run(
            ["npm", "run", "build"], cwd=UI, check=True, capture_output=True, timeout=600
        )
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
                if httpx.get(f"{url}/api/ok", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.25)
        else:
            raise AssertionError(f"the UI server did not start:\n{log.read_text()}")
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)


def threads(dev_server: DevServer) -> int:
    return len(httpx.post(f"{dev_server.url}/threads/search", json={"limit": 100}).json())


def test_the_ui_on_any_port_writes_and_a_foreign_page_through_its_proxy_cannot(
    dev_server: DevServer, ui_url: str
) -> None:
    own = httpx.post(f"{ui_url}/api/threads", json={}, headers={"Origin": ui_url})
    assert own.status_code == 200, own.text
    assert threads(dev_server) == 1

    port = ui_url.rsplit(":", 1)[1]
    foreign = {
        "a foreign page": {"Origin": "https://evil.example"},
        "a rebound name": {"Origin": f"http://evil.example:{port}", "Host": f"evil.example:{port}"},
    }
    for who, headers in foreign.items():
        refused = httpx.post(
            f"{ui_url}/api/threads",
            content="{}",
            headers={**headers, "Content-Type": "application/json"},
        )
        assert refused.status_code == 403, (who, refused.text)
        assert "access-control-allow-origin" not in refused.headers, who
    assert threads(dev_server) == 1
    read = httpx.get(f"{ui_url}/api/ok", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in read.headers
