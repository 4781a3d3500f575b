"""Which requests ``agent.origins`` refuses before any route of the server sees them: writes a
foreign web page may have sent; reads, and every request of a listed origin, go through."""

from __future__ import annotations

import pytest
from starlette.datastructures import Headers

from agent.origins import AllowedOrigins, refusal

LISTED = AllowedOrigins.of(["https://smith.langchain.com"], r"https://.*\.ui\.example")


def refused(method: str, **headers: str) -> int | None:
    response = refusal(Headers(headers), method, LISTED)
    return None if response is None else response.status_code


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_a_write_from_an_unlisted_origin_is_forbidden(method: str) -> None:
    assert refused(method, origin="https://evil.example", host="127.0.0.1:2024") == 403
    assert refused(method, origin="null", host="127.0.0.1:2024") == 403  # sandboxed or file://


@pytest.mark.parametrize(
    "body",
    [
        "text/plain",
        "text/plain; charset=utf-8",
        "multipart/form-data; boundary=x",
        "application/x-www-form-urlencoded",
    ],
)
def test_a_body_a_browser_sends_cross_site_unasked_is_refused_from_anyone(body: str) -> None:
    assert refused("POST", **{"content-type": body}) == 415
    assert refused("POST", origin="https://smith.langchain.com", **{"content-type": body}) == 415


def test_listed_origins_clients_without_an_origin_and_reads_go_through() -> None:
    assert refused("POST", origin="https://smith.langchain.com") is None
    assert refused("POST", origin="https://team.ui.example") is None  # allow_origin_regex
    assert refused("POST", **{"content-type": "application/json"}) is None  # the SDK, curl
    assert refused("GET", origin="https://evil.example") is None  # CORS hides the reply


@pytest.mark.parametrize(
    ("origin", "host", "status"),
    [
        ("http://127.0.0.1:2024", "127.0.0.1:2024", None),
        ("http://localhost:2024", "localhost:2024", None),
        ("http://[::1]:2024", "[::1]:2024", None),
        ("http://127.0.0.1:9999", "127.0.0.1:2024", 403),  # another local port: another origin
        ("http://evil.example:2024", "evil.example:2024", 403),  # DNS rebinding
    ],
)
def test_only_the_apis_own_loopback_page_is_its_own_origin(
    origin: str, host: str, status: int | None
) -> None:
    assert refused("POST", origin=origin, host=host) == status
