"""The request files: the shipped suite covers what issue 27 asks, and a hand-written (held-out)
file with a mistake is refused at once with the request and field named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.eval.requests import RequestFileError, load_requests, parse_requests


def test_the_shipped_suite_loads_and_covers_every_kind_asked_for() -> None:
    requests = load_requests()
    assert 18 <= len(requests) <= 25
    kinds = {request.kind for request in requests}
    for kind in ("single-item", "several-item", "delete", "update", "cannot be done"):
        assert kind in kinds
    assert any("add" in k and "complete" in k and "list" in k for k in kinds)
    assert any("tasks" in request.workers for request in requests)
    assert any("conversation_tasks" in request.toolsets for request in requests)
    assert any(request.expect.plan == "none" for request in requests)
    assert any(request.expect.cannot_do for request in requests)
    assert any('"' in r.text or "'" in r.text for r in requests)
    assert any(not ("'" in r.text or '"' in r.text) for r in requests)


def good() -> dict[str, Any]:
    return {
        "id": "one",
        "kind": "single-item",
        "request": "Add 'x'.",
        "items": 1,
        "expect": {"personal": {"open": ["x"], "done": []}},
    }


def refused(change: dict[str, Any], *remove: str) -> str:
    raw = {**good(), **change}
    for key in remove:
        raw.pop(key)
    with pytest.raises(RequestFileError) as caught:
        parse_requests({"requests": [raw]}, "held-out.json")
    return str(caught.value)


def test_mistakes_are_named() -> None:
    assert "missing key(s) items" in refused({}, "items")
    assert "unknown key(s) expected" in refused({"expected": {}})
    assert "request 'one'.toolsets: unknown name 'calendar'" in refused({"toolsets": ["calendar"]})
    assert "request 'one'.expect.plan: must be 'any' or 'none'" in refused(
        {"expect": {"plan": "never"}}
    )
    assert "request 'one'.items: must be a whole number" in refused({"items": -1})
    assert "missing key(s) done" in refused({"expect": {"personal": {"open": []}}})
    assert "neither the toolset personal_tasks nor the worker tasks" in refused({"toolsets": []})
    assert "the toolset conversation_tasks is not bound" in refused(
        {"expect": {"conversation": {"open": ["x"], "done": []}}}
    )


def test_ids_are_unique() -> None:
    with pytest.raises(RequestFileError, match="request id 'one' is used twice"):
        parse_requests({"requests": [good(), good()]})


def test_a_file_that_is_not_json_is_refused_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "held-out.json"
    path.write_text("{nope", encoding="utf-8")
    with pytest.raises(RequestFileError, match=r"held-out\.json: not valid JSON"):
        load_requests(path)
    path.write_text(json.dumps({"requests": [good()]}), encoding="utf-8")
    assert [request.id for request in load_requests(path)] == ["one"]
