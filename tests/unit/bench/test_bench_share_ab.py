"""``python -m bench.share_ab``: checkouts compared turn by turn, each turn done right, on SQLite
and on PostgreSQL (one server, a fresh database a turn), so a keep-or-remove figure is never
taken from a turn that failed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.share_ab import main

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("backend", [[], ["--postgres"]], ids=["sqlite", "postgresql"])
def test_two_trees_are_compared_with_every_turn_done(
    backend: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    trees = [f"this={ROOT}", f"again={ROOT}"]

    assert main([*trees, "--rounds", "1", "--n", "2", *backend]) == 0

    table = capsys.readouterr().out
    rows = [line for line in table.splitlines() if line.startswith(("| this ", "| again "))]
    assert len(rows) == 2
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[1] == "1" and cells[5] == "4"  # one turn of 2 items: 4 model calls
        assert cells[6] == "none"  # no problem in the turn
        assert 0 < float(cells[2]) < 100
