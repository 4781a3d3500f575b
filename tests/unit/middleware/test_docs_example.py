"""docs/middleware.md's example runs as printed, offline, and prints what the page says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PAGE = REPO / "docs" / "middleware.md"


def test_the_middleware_page_example_runs_and_prints_what_the_page_says(tmp_path: Path) -> None:
    text = PAGE.read_text()
    (block,) = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    printed = re.search(r"It prints `(.+?)`", text)
    assert printed is not None
    script = tmp_path / "example.py"
    script.write_text(block)
    env = {**os.environ, "PYTHONPATH": str(REPO), "TURNPLAN_DATABASE_URL": ""}
    done = subprocess.run(
        [sys.executable, "-W", "error", str(script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == printed[1]
