"""The request files: the shipped suite covers what issue 27 asks, and a hand-written (held-out)
file with a mistake is refused at once with the request and field named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.eval.requests import (
    DEFAULT_CORPUS,
    RequestFileError,
    load_corpus,
    load_requests,
    parse_requests,
)


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


def test_a_request_may_have_earlier_turns_a_class_and_its_files_part() -> None:
    follow_up = {
        **good(),
        "class": "follow-up",
        "turns": ["Add 'x'.", " Show my tasks. "],
        "request": "Mark it done.",
    }
    document = {
        "part": "untuned",
        "class": "harm",
        "requests": [follow_up, {**good(), "id": "two"}],
    }
    first, second = parse_requests(document)
    assert first.turns == ("Add 'x'.", "Show my tasks.") and first.text == "Mark it done."
    assert (first.group, first.part) == ("follow-up", "untuned")
    assert (second.group, second.part, second.turns) == ("harm", "untuned", ())
    (plain,) = parse_requests({"requests": [good()]})
    assert (plain.group, plain.part) == ("README-like", "tuning")


def test_mistakes_in_the_new_fields_are_named() -> None:
    assert "request 'one'.turns[1]: must be a non-empty string" in refused({"turns": ["a", " "]})
    assert "request 'one'.turns: must be a list" in refused({"turns": "Add 'x'."})
    assert "request 'one'.expect.may_ask: must be true or false" in refused(
        {"expect": {"may_ask": "yes"}}
    )
    assert "request 'one'.expect.task_tools: must be 'any' or 'none'" in refused(
        {"expect": {"task_tools": "never"}}
    )
    with pytest.raises(RequestFileError, match="part: must be one of tuning, untuned"):
        parse_requests({"part": "secret", "requests": [good()]})


def test_ids_are_unique_across_the_files_of_a_corpus(tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps({"requests": [good()]}), encoding="utf-8")
    second.write_text(json.dumps({"part": "untuned", "requests": [good()]}), encoding="utf-8")
    with pytest.raises(RequestFileError, match="request id 'one' is used twice"):
        load_corpus([first, second])


def test_the_second_tuning_file_has_new_phrasings_of_the_corpus_classes_only() -> None:
    second = load_requests(DEFAULT_CORPUS[3])
    earlier = [
        request.text.casefold() for path in DEFAULT_CORPUS[:3] for request in load_requests(path)
    ]
    assert len(second) >= 40 and all(r.part == "tuning" for r in second)
    assert {r.group for r in second} <= {r.group for r in load_requests(DEFAULT_CORPUS[2])}
    assert not [r.id for r in second if r.text.casefold() in earlier]
    assert len([r for r in second if r.group == "non-English"]) >= 20  # 5 languages, 4 actions


def test_the_shipped_corpus_has_its_classes_in_both_parts_and_a_harm_class() -> None:
    corpus = load_corpus()
    assert [path.name for path in DEFAULT_CORPUS] == [
        "requests.json",
        "heldout.json",
        "corpus.json",
        "corpus2.json",
        "untuned.json",
    ]
    # The corpus written before any rule was tuned: about a third of it held out.
    first = [*load_requests(DEFAULT_CORPUS[2]), *load_requests(DEFAULT_CORPUS[-1])]
    new = [r for r in first if r.group != "README-like"]
    untuned = [r for r in corpus if r.part == "untuned"]
    assert len(new) >= 60 and len(untuned) >= 20
    assert 0.25 <= len([r for r in new if r.part == "untuned"]) / len(new) <= 0.4
    assert {r.group for r in corpus if r.part == "tuning"} == {r.group for r in untuned}
    assert all(r.part == "untuned" for r in load_requests(DEFAULT_CORPUS[-1]))
    classes = {r.group for r in corpus}
    for group in ("harm", "pronouns", "follow-up", "negation", "questions", "quotes"):
        assert group in classes
    for group in ("prose-lists", "non-English", "synonyms", "README-like"):
        assert group in classes
    assert any(r.turns for r in untuned) and any(r.turns for r in corpus if r.part == "tuning")
    # Harm requests: nothing may change, so their expected end state is their setup.
    for r in corpus:
        if r.group == "harm":
            expected = r.expect.personal
            assert expected is not None
            setup = sorted((s.title, s.done) for s in r.setup_personal)
            got = sorted(
                [(t[0], False) for t in expected.open] + [(t[0], True) for t in expected.done]
            )
            assert got == setup, r.id
    # Questions and small talk call no task tool.
    assert all(r.expect.task_tools == "none" for r in corpus if r.group == "questions")
    # A quoted title up to the limit.
    assert (
        max(
            len(t[0]) for r in corpus for t in (r.expect.personal.open if r.expect.personal else ())
        )
        > 150
    )
