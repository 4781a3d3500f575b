"""``python -m bench.eval``: run the suite's requests on each system and write the results.

    python -m bench.eval [--model MODEL] [--systems ...] [--repeat K] [--limit N] [--out DIR]
                         [--requests FILE ...] [--part PART] [--class CLASS ...]
                         [--timeout SECONDS] [--audit-model MODEL]
                         [--profile auto|full|compact] [--every N]

Without options: every request of ``bench.eval.requests.DEFAULT_CORPUS`` (the README-like suite,
issue 40's tuning corpus and its untuned part) on ``turnplan-auto`` with the default model
(``local`` without an API key: the embedded model and the compact profile).

Runs are interleaved (for each request and repeat, every system in turn), so a slow spell of a
shared machine falls on all systems alike. Every run has a fresh folder; a run that raises or
times out is recorded as failed with its error and the suite goes on. ``results.json`` is
rewritten after every run, so an interrupted suite keeps what it measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TextIO

from agent.llm.chat_models import close_chat_models, resolve_model_setting
from bench.eval.checks import failed_checks, harm_of
from bench.eval.report import RunRecord, hidden, markdown
from bench.eval.requests import DEFAULT_CORPUS, PARTS, EvalRequest, RequestFileError, load_corpus
from bench.eval.systems import (
    DEFAULT_SYSTEMS,
    SYSTEM_NAMES,
    EvalSystem,
    UsageCounter,
    all_systems,
)

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "results" / "eval"
DEFAULT_TIMEOUT = 900.0
PACKAGES = ("langgraph", "langchain-core", "langchain-openai", "langchain", "llama-cpp-python")
ERROR_LIMIT = 300


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def run_facts(
    model: str, requests_files: Sequence[Path], repeat: int, profile: str = "auto"
) -> dict[str, str]:
    """What the results were measured on, for the head of ``results.md``."""
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "model": model,
        "prompt profile": profile,
        "requests": ", ".join(str(path) for path in requests_files),
        "repeats": str(repeat),
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(),
        "packages": ", ".join(f"{p} {_version(p)}" for p in PACKAGES),
    }


def _reason(error: BaseException) -> str:
    text = " ".join(str(error).split()) or "(no message)"
    text = f"{type(error).__name__}: {text}"
    return text if len(text) <= ERROR_LIMIT else text[: ERROR_LIMIT - 1] + "…"


async def run_one(
    system: EvalSystem, request: EvalRequest, model: str, repeat: int, limit: float
) -> RunRecord:
    """One run, checked; never raises for the run's own failure."""
    usage = UsageCounter()
    started = time.perf_counter()
    error = ""
    checks: list[str] = []
    answer = ""
    plan_items = 0
    audit = (0, 0)
    status = ""
    harm: list[str] = []
    paused = False
    with tempfile.TemporaryDirectory(prefix="turnplan-eval-") as workdir:
        try:
            outcome = await asyncio.wait_for(
                system.run(request, model, Path(workdir), usage), limit
            )
        except TimeoutError:
            error = f"timed out after {limit:.0f} s"
        except Exception as failure:  # one failing run never aborts the suite
            error = _reason(failure)
        else:
            checks = failed_checks(request, outcome)
            harm, paused = harm_of(request, outcome), outcome.paused
            answer, plan_items = outcome.answer, outcome.plan_items
            audit, status = (outcome.audit_calls, outcome.audit_tokens), outcome.turn_status
    seconds = time.perf_counter() - started
    if usage.calls_without_usage:
        checks.append(f"{usage.calls_without_usage} LLM call(s) reported no token usage")
    return RunRecord(
        system=system.name,
        request=request.id,
        repeat=repeat,
        success=not error and not checks,
        llm_calls=usage.calls,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        seconds=round(seconds, 3),
        items=request.items,
        failed_checks=[f"error: {error}"] if error else checks,
        plan_items=plan_items,
        answer=answer,
        error=error,
        turn_status=status,
        audit_calls=audit[0],
        audit_tokens=audit[1],
        group=request.group,
        part=request.part,
        harm=harm,
        paused=paused,
    )


def progress_line(
    done: int, total: int, record: RunRecord, width: int = 20, show_untuned: bool = False
) -> str:
    """``[#####-----] 5/20 turnplan-auto add-one ok 12.3 s`` (or the first failed check and
    the first harm); an untuned request is shown as ``(untuned)`` with no detail."""
    filled = round(width * done / total) if total else width
    secret = hidden(record, show_untuned)
    status = "ok" if record.success else "FAILED"
    if not record.success and not secret:
        status += f" ({record.failed_checks[0]})"
    if record.harm:
        status += " HARM" if secret else f" HARM ({record.harm[0]})"
    name = "(untuned)" if secret else record.request
    return (
        f"[{'#' * filled}{'-' * (width - filled)}] {done}/{total} {record.system} "
        f"{name} #{record.repeat + 1}: {status} {record.seconds:.1f} s, "
        f"{record.llm_calls} calls"
    )


async def run_suite(
    requests: Sequence[EvalRequest],
    systems: Sequence[EvalSystem],
    model: str,
    *,
    repeat: int,
    limit: float,
    out: Path,
    meta: dict[str, str],
    progress: TextIO | None = None,
    show_untuned: bool = False,
) -> list[RunRecord]:
    """Every (request, repeat, system) run, in that order, written to ``out`` as it goes; a
    line per run on ``progress`` (default: standard error), untuned requests unnamed unless
    ``show_untuned``."""
    progress = progress or sys.stderr
    total = len(requests) * repeat * len(systems)
    records: list[RunRecord] = []
    try:
        for request in requests:
            for index in range(repeat):
                for system in systems:
                    name = (
                        "(untuned)"
                        if request.part == "untuned" and not show_untuned
                        else request.id
                    )
                    started = f"{len(records) + 1}/{total} {system.name} {name} #{index + 1}"
                    print(f"... {started}: running", file=progress, flush=True)
                    record = await run_one(system, request, model, index, limit)
                    records.append(record)
                    line = progress_line(len(records), total, record, show_untuned=show_untuned)
                    print(line, file=progress, flush=True)
                    await asyncio.to_thread(write_results, out, records, meta, show_untuned)
    finally:
        await close_chat_models()
    return records


def write_results(
    out: Path, records: Sequence[RunRecord], meta: dict[str, str], show_untuned: bool = False
) -> None:
    (out / "results.json").write_text(
        json.dumps([record.as_dict() for record in records], indent=2, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    (out / "results.md").write_text(markdown(records, meta, show_untuned), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.eval", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--model",
        help='model setting, as the agent takes it ("local", "openai:<model>" with '
        "OPENAI_BASE_URL, other providers); default: TURNPLAN_MODEL, else the agent's default",
    )
    parser.add_argument(
        "--systems",
        nargs="+",
        choices=SYSTEM_NAMES,
        help=f"systems to run (default: {' '.join(DEFAULT_SYSTEMS)})",
    )
    parser.add_argument(
        "--audit-model",
        help="turnplan-audit's auditor (Context.audit_model), any model setting; default: --model",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of each request per system")
    parser.add_argument("--limit", type=int, help="only the first N requests")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder for the results")
    parser.add_argument(
        "--requests",
        type=Path,
        nargs="+",
        default=list(DEFAULT_CORPUS),
        help="request file(s) (JSON); default: the README-like suite and issue 40's corpus, "
        "both parts",
    )
    parser.add_argument("--part", choices=PARTS, help="only the requests of this part")
    parser.add_argument(
        "--show-untuned",
        action="store_true",
        help="name the untuned requests in the progress and results.md (hidden by default: "
        "whoever tunes the rules must not read them)",
    )
    parser.add_argument(
        "--class", dest="classes", nargs="+", metavar="CLASS", help="only these classes"
    )
    parser.add_argument(
        "--profile",
        choices=("auto", "full", "compact"),
        default="auto",
        help="turnplan's Context.prompt_profile (auto: compact for the embedded models, as a "
        "deployment gets it)",
    )
    parser.add_argument(
        "--every",
        type=int,
        default=1,
        metavar="N",
        help="a fixed subset: the 1st, (N+1)th, (2N+1)th ... request after --part/--class "
        "(before --limit), the same for every model and profile",
    )
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds before a run is failed"
    )
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.every < 1 or (args.limit is not None and args.limit < 1):
        parser.error("--repeat, --every and --limit must be at least 1")
    try:
        requests = load_corpus(args.requests)
    except RequestFileError as error:
        parser.error(str(error))
    if args.part:
        requests = [r for r in requests if r.part == args.part]
    if args.classes:
        requests = [r for r in requests if r.group in args.classes]
    if not requests:
        parser.error("no request matches --part/--class")
    requests = requests[:: args.every]
    requests = requests[: args.limit] if args.limit else requests
    systems = [
        s
        for s in all_systems(args.audit_model, args.profile)
        if s.name in (args.systems or DEFAULT_SYSTEMS)
    ]
    model = resolve_model_setting(args.model)
    meta = run_facts(model, args.requests, args.repeat, args.profile)
    if args.every > 1:
        meta["subset"] = f"1 request in {args.every}, from the first ({len(requests)} requests)"
    if args.audit_model and "turnplan-audit" in [s.name for s in systems]:
        meta["audit model"] = args.audit_model
    args.out.mkdir(parents=True, exist_ok=True)
    records = asyncio.run(
        run_suite(
            requests,
            systems,
            model,
            repeat=args.repeat,
            limit=args.timeout,
            out=args.out,
            meta=meta,
            show_untuned=args.show_untuned,
        )
    )
    print(markdown(records, meta, args.show_untuned))
    print(f"written: {args.out / 'results.json'}, {args.out / 'results.md'}", file=sys.stderr)
    return 0
