"""What ``server_run_fate`` answers about a run, from what the LangGraph server's in-process
client says: deleted (a rollback), interrupted, anything else; and, when the server cannot be
asked, "other", which closes nothing (a turn is never closed on a guess)."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest
from langgraph_sdk.errors import APIConnectionError, InternalServerError, NotFoundError

from agent import run_fates
from agent.run_fates import server_run_fate

REQUEST = httpx.Request("GET", "http://server/threads/t/runs/r")


class Runs:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    async def get(self, thread_id: str, run_id: str) -> dict[str, Any]:
        if isinstance(self.answer, Exception):
            raise self.answer
        return {"run_id": run_id, "thread_id": thread_id, "status": self.answer}


class Client:
    def __init__(self, answer: Any) -> None:
        self.runs = Runs(answer)

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *_: object) -> None:
        return None


def server_answering(monkeypatch: pytest.MonkeyPatch, answer: Any) -> None:
    monkeypatch.setattr(run_fates, "get_client", lambda: Client(answer))


def status_error(kind: type[Exception], code: int) -> Exception:
    response = httpx.Response(code, request=REQUEST)
    return kind("the server said no", response=response, body=None)


@pytest.mark.parametrize(
    "answer, fate",
    [
        ("interrupted", "interrupted"),
        ("success", "other"),
        ("error", "other"),
        ("running", "other"),
    ],
)
async def test_a_run_the_server_has_is_interrupted_or_other(
    monkeypatch: pytest.MonkeyPatch, answer: str, fate: str
) -> None:
    server_answering(monkeypatch, answer)
    assert await server_run_fate("t", "r") == fate


async def test_a_run_the_server_no_longer_has_was_rolled_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server_answering(monkeypatch, status_error(NotFoundError, 404))
    assert await server_run_fate("t", "r") == "rolled_back"


@pytest.mark.parametrize(
    "failure",
    [
        status_error(InternalServerError, 500),
        APIConnectionError(request=REQUEST),
        httpx.ReadTimeout("slow", request=REQUEST),
    ],
)
async def test_a_server_that_cannot_be_asked_closes_nothing_and_is_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, failure: Exception
) -> None:
    server_answering(monkeypatch, failure)
    with caplog.at_level(logging.WARNING, logger="agent.run_fates"):
        assert await server_run_fate("t", "r") == "other"
    assert "could not ask the server about run r" in caplog.text
