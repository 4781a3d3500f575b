"""``python -m bench.readme_runs``: README's main command, run N times, each in a fresh folder.

README's first command is what every user meets first, so its table is measured, not written:
each run starts ``turnplan run`` as README does (its own SQLite file under ``.turnplan/``, the
embedded model started and stopped by the run), and the table says what a user would check:
wall time, the turn's status and LLM calls, the plan's titles, the tasks in the database
afterwards, and whether the answer lists what is left. A run is correct when the tasks are
exactly the request's two, with no plan row restating another, and the answer names both.

    python -m bench.readme_runs [--runs 5] [--turnplan .venv/bin/turnplan] [--plan always]

Run it from the repository root; it prints a markdown table (progress on stderr).
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REQUEST = (
    "Plan my Saturday: add 'buy groceries' and 'do laundry' to my tasks, then show me what is left"
)
EXPECTED_TASKS = ["buy groceries", "do laundry"]
_PLANNED = re.compile(r"^\s+\+ planned\s+(.*)$", re.MULTILINE)
_STATUS = re.compile(r"^turn (\S+) · (\d+) LLM call\(s\)", re.MULTILINE)


@dataclass
class ReadmeRun:
    seconds: float
    status: str
    llm_calls: int
    plan_titles: list[str]
    tasks: list[str]
    answer: str

    @property
    def correct(self) -> bool:
        """Exactly the two tasks, each once, and an answer that shows both as left."""
        shows_left = all(title in self.answer for title in EXPECTED_TASKS)
        return self.status == "answered" and self.tasks == EXPECTED_TASKS and shows_left


def run_once(turnplan: str, extra: list[str]) -> ReadmeRun:
    """One run of README's command in a fresh folder."""
    with tempfile.TemporaryDirectory(prefix="readme-run-") as folder:
        started = time.monotonic()
        completed = subprocess.run(
            [turnplan, "run", *extra, REQUEST],
            cwd=folder,
            capture_output=True,
            text=True,
            check=False,
        )
        seconds = time.monotonic() - started
        output = completed.stdout
        status_match = _STATUS.search(output)
        database = Path(folder) / ".turnplan" / "turnplan.db"
        tasks: list[str] = []
        if database.exists():
            with sqlite3.connect(database) as connection:
                tasks = [
                    row[0]
                    for row in connection.execute(
                        "SELECT title FROM tasks WHERE deleted_at IS NULL ORDER BY created_at"
                    )
                ]
        answer = output.split("\nanswer:\n", 1)[-1] if "\nanswer:\n" in output else ""
        return ReadmeRun(
            seconds=seconds,
            status=status_match.group(1) if status_match else f"exit {completed.returncode}",
            llm_calls=int(status_match.group(2)) if status_match else 0,
            plan_titles=_PLANNED.findall(output),
            tasks=tasks,
            answer=answer,
        )


def table(runs: list[ReadmeRun]) -> str:
    lines = [
        "| run | wall time | status | plan titles | tasks in the database | answer lists them |",
        "|---:|---:|---|---|---|---|",
    ]
    for number, run in enumerate(runs, 1):
        lines.append(
            f"| {number} | {run.seconds:.1f} s | {run.status}, {run.llm_calls} LLM call(s) | "
            f"{' · '.join(run.plan_titles) or '(no plan)'} | {' · '.join(run.tasks) or '(none)'} "
            f"| {'yes' if all(t in run.answer for t in EXPECTED_TASKS) else 'no'} |"
        )
    correct = sum(run.correct for run in runs)
    lines.append("")
    lines.append(f"Whole request correct in {correct} of {len(runs)} runs.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--turnplan", default=".venv/bin/turnplan")
    parser.add_argument("--plan", choices=("auto", "always"), default=None)
    args = parser.parse_args(argv)
    turnplan = str(Path(args.turnplan).resolve())
    extra = ["--plan", args.plan] if args.plan else []
    runs = []
    for number in range(1, args.runs + 1):
        print(f"run {number}/{args.runs} …", file=sys.stderr, flush=True)
        runs.append(run_once(turnplan, extra))
        print(f"run {number}: {runs[-1].seconds:.1f} s, {runs[-1].status}", file=sys.stderr)
    print(table(runs))
    return 0 if all(run.correct for run in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
