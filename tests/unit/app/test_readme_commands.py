"""CI must run exactly what README.md tells a newcomer to run."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def readme_commands() -> list[str]:
    quick_start = (REPO / "README.md").read_text().split("## Quick start", 1)[1]
    quick_start = quick_start.split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", quick_start, re.S)][:2]


def test_readme_quick_start_has_the_setup_and_test_commands() -> None:
    setup, tests = readme_commands()
    assert "pip install" in setup and "turnplan run" in setup
    assert "pytest" in tests


def test_ci_runs_the_readme_commands_verbatim_and_in_order() -> None:
    ci_lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    setup, tests = readme_commands()
    assert setup in ci_lines and tests in ci_lines
    assert ci_lines.index(setup) < ci_lines.index(tests)
