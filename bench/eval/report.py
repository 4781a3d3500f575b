"""The evaluation's results: one record per run (``results.json``) and the tables
(``results.md``): per part (tuning, untuned) and class, success and harm (issue 40: a wrong
change is worse than none, so it is counted apart); per system, success with a 95 % Wilson
interval, LLM calls, tokens, tokens per completed item and wall time; per request, which checks
failed for which system and what harm was done."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

Z95 = 1.959963984540054
"""The standard normal quantile of a two-sided 95 % interval."""


@dataclass
class RunRecord:
    """One run of one request on one system."""

    system: str
    request: str
    repeat: int
    success: bool
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    items: int
    """What the request asks for, counted (``EvalRequest.items``)."""
    failed_checks: list[str] = field(default_factory=list)
    plan_items: int = 0
    answer: str = ""
    error: str = ""
    """The exception that ended the run, if one did (the run is then failed)."""
    turn_status: str = ""
    """turnplan's ``turnStatus`` at the end of the run (empty for other systems, or when the
    run raised)."""
    audit_calls: int = 0
    """Calls of the audit model (``Context.audit_model``); ``llm_calls`` counts them too."""
    audit_tokens: int = 0
    group: str = "README-like"
    """The request's class."""
    part: str = "tuning"
    """The request's part: ``tuning`` or ``untuned`` (held out)."""
    harm: list[str] = field(default_factory=list)
    """Changes to the tasks nobody asked for (``bench.eval.checks.harm_of``)."""
    paused: bool = False
    """The measured turn ended paused on a question."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def wilson_interval(successes: int, runs: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a success rate (0 to 1): unlike the normal approximation it
    stays within [0, 1] and is honest at 0 % and 100 % with few runs."""
    if runs <= 0:
        return 0.0, 1.0
    p = successes / runs
    denominator = 1 + z * z / runs
    centre = (p + z * z / (2 * runs)) / denominator
    half = z * math.sqrt(p * (1 - p) / runs + z * z / (4 * runs * runs)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class SystemSummary:
    """The figures of one system over its runs."""

    system: str
    runs: int
    successes: int
    low: float
    high: float
    calls_per_run: float
    prompt_per_run: float
    completion_per_run: float
    tokens_per_item: float | None
    """All tokens of all runs divided by the items of the successful runs (None: none)."""
    seconds_per_run: float
    total_seconds: float


def summarise(system: str, records: Sequence[RunRecord]) -> SystemSummary:
    runs = len(records)
    successes = sum(1 for record in records if record.success)
    low, high = wilson_interval(successes, runs)
    tokens = sum(record.prompt_tokens + record.completion_tokens for record in records)
    items = sum(record.items for record in records if record.success)
    total_seconds = sum(record.seconds for record in records)
    per = max(runs, 1)
    return SystemSummary(
        system=system,
        runs=runs,
        successes=successes,
        low=low,
        high=high,
        calls_per_run=sum(record.llm_calls for record in records) / per,
        prompt_per_run=sum(record.prompt_tokens for record in records) / per,
        completion_per_run=sum(record.completion_tokens for record in records) / per,
        tokens_per_item=tokens / items if items else None,
        seconds_per_run=total_seconds / per,
        total_seconds=total_seconds,
    )


def _percent(value: float) -> str:
    return f"{100 * value:.0f} %"


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def hidden(record: RunRecord, show_untuned: bool) -> bool:
    """Whether the run's request is kept out of sight: an untuned (held-out) request's id,
    answer and failed checks would tell whoever tunes the rules what the part asks, and then it
    is held out no more. Its figures still count in every table."""
    return record.part == "untuned" and not show_untuned


def markdown(records: Sequence[RunRecord], meta: dict[str, str], show_untuned: bool = False) -> str:
    """``results.md``: the run's facts, the tables per class and per system, and the failed
    checks per request and system (the untuned part's only with ``show_untuned``)."""
    systems = list(dict.fromkeys(record.system for record in records))
    requests = list(dict.fromkeys(r.request for r in records if not hidden(r, show_untuned)))
    secret = len({r.request for r in records if hidden(r, show_untuned)})
    lines = ["# Evaluation results (`python -m bench.eval`)", ""]
    lines += [f"- {key}: {value}" for key, value in meta.items()]
    lines += class_lines(records, systems)
    lines += [
        "",
        "## Per system",
        "",
        "| system | runs | success | 95 % interval | LLM calls / run | prompt tokens / run "
        "| completion tokens / run | tokens / completed item | seconds / run | total seconds |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for system in systems:
        s = summarise(system, [r for r in records if r.system == system])
        lines.append(
            f"| {system} | {s.runs} | {s.successes}/{s.runs} ({_percent(s.successes / s.runs)}) "
            f"| {_percent(s.low)} to {_percent(s.high)} | {s.calls_per_run:.1f} "
            f"| {_number(s.prompt_per_run)} | {_number(s.completion_per_run)} "
            f"| {_number(s.tokens_per_item)} | {s.seconds_per_run:.1f} | {s.total_seconds:.0f} |"
        )
    lines += [
        "",
        "Tokens per completed item: all tokens (prompt and completion) of the system's runs, "
        "divided by the items of its successful runs.",
        "",
        "## Per request",
        "",
        "| request | " + " | ".join(systems) + " |",
        "|---|" + "---|" * len(systems),
    ]
    for request in requests:
        cells = []
        for system in systems:
            runs = [r for r in records if r.system == system and r.request == request]
            ok = sum(1 for r in runs if r.success)
            cells.append(f"{ok}/{len(runs)}" if runs else "n/a")
        lines.append(f"| {request} | " + " | ".join(cells) + " |")
    if secret:
        lines += [
            "",
            f"The {secret} untuned requests are counted above but not named here "
            "(`--show-untuned` names them; `results.json` has every run).",
        ]
    lines += status_lines(records, systems)
    failures = [r for r in records if not r.success and not hidden(r, show_untuned)]
    lines += ["", "## Failed checks", ""]
    if not failures:
        lines.append("None: every run passed every check.")
    for request in requests:
        for system in systems:
            runs = [r for r in failures if r.system == system and r.request == request]
            if not runs:
                continue
            lines.append(f"- **{request}**, {system}:")
            for run in runs:
                why = "; ".join(run.failed_checks) or run.error
                harm = f" HARM: {'; '.join(run.harm)}" if run.harm else ""
                lines.append(f"  - run {run.repeat + 1}: {_cell(why + harm)}")
    return "\n".join(lines) + "\n"


def _rates(runs: Sequence[RunRecord]) -> str:
    """``| runs | success | harm | paused | seconds / run |`` cells of a row."""
    count = len(runs)
    ok = sum(1 for r in runs if r.success)
    harmed = sum(1 for r in runs if r.harm)
    paused = sum(1 for r in runs if r.paused)
    seconds = sum(r.seconds for r in runs) / max(count, 1)
    return (
        f"{count} | {ok}/{count} ({_percent(ok / count)}) "
        f"| {harmed}/{count} ({_percent(harmed / count)}) | {paused} | {seconds:.1f} |"
    )


def class_lines(records: Sequence[RunRecord], systems: Sequence[str]) -> list[str]:
    """Success and harm per system, part and class, each part's total after its classes.

    Harm is a share of runs (a run that made any change nobody asked for), not of changes: one
    stray deletion is already the failure issue 40 is about."""
    lines = [
        "",
        "## Per part and class: success and harm",
        "",
        "| system | part | class | runs | success | harm | paused | seconds / run |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for system in systems:
        mine = [r for r in records if r.system == system]
        for part in dict.fromkeys(r.part for r in mine):
            in_part = [r for r in mine if r.part == part]
            for group in sorted(dict.fromkeys(r.group for r in in_part)):
                runs = [r for r in in_part if r.group == group]
                lines.append(f"| {system} | {part} | {group} | {_rates(runs)}")
            lines.append(f"| {system} | **{part}** | **all** | {_rates(in_part)}")
        if len({r.part for r in mine}) > 1:
            lines.append(f"| {system} | **all** | **all** | {_rates(mine)}")
    lines += [
        "",
        "Success: every check passed. Harm: the run changed the tasks in a way nobody asked "
        "for (added, completed, reopened, deleted or renamed a task the expectations do not "
        "name). Paused: the turn ended on a question (`ask_user`).",
    ]
    return lines


def status_lines(records: Sequence[RunRecord], systems: Sequence[str]) -> list[str]:
    """How turnplan's turns ended, and what the answer audit cost and caught: a turn that
    ended ``incomplete`` or ``failed`` though the checks passed is a false alarm; one that ended
    ``answered`` though they failed is a miss. Nothing when no run has a turn status."""
    shown = [s for s in systems if any(r.turn_status for r in records if r.system == s)]
    if not shown:
        return []
    lines = [
        "",
        "## Turn status and answer audit",
        "",
        "| system | turn status | audit calls / run | audit tokens / run "
        "| not answered, checks passed | answered, checks failed |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for system in shown:
        runs = [r for r in records if r.system == system]
        statuses = Counter(r.turn_status or "(none)" for r in runs)
        per = max(len(runs), 1)
        alarms = sum(1 for r in runs if r.success and r.turn_status not in ("answered", ""))
        misses = sum(1 for r in runs if not r.success and r.turn_status == "answered")
        lines.append(
            f"| {system} | {', '.join(f'{k} {v}' for k, v in sorted(statuses.items()))} "
            f"| {sum(r.audit_calls for r in runs) / per:.1f} "
            f"| {_number(sum(r.audit_tokens for r in runs) / per)} | {alarms} | {misses} |"
        )
    return lines


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")
