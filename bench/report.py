"""The benchmark's report: one row per system and N, growth laws, and what could not run.

Timings appear as milliseconds of this run and as ratios to turnplan at the same N; only the
ratios mean anything across machines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from bench.growth import growth_law
from bench.measure import Measurement

FIGURES: dict[str, str] = {
    "calls": "LLM calls",
    "prompt_tokens": "prompt tokens (sum)",
    "max_prompt_tokens": "largest prompt",
    "completion_tokens": "completion tokens",
    "overhead_ms": "overhead ms per turn",
    "checkpointed_overhead_ms": "checkpointed overhead ms per turn",
}
REFERENCE = "turnplan"


def percent(fraction: float | None) -> str:
    """A fraction as a percentage with one decimal, or empty when there is none."""
    return "" if fraction is None else f"{100 * fraction:.1f}"


@dataclass
class Report:
    """Everything one run of the benchmark produced."""

    meta: dict[str, str]
    paths: dict[str, str]
    """system -> the oracle's path, in one line."""
    measurements: list[Measurement] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)
    share: str = ""
    """The harness's share table (``bench.share``), when it was measured."""

    @property
    def systems(self) -> list[str]:
        return list(dict.fromkeys(m.system for m in self.measurements))

    def of(self, system: str) -> list[Measurement]:
        return [m for m in self.measurements if m.system == system]

    def growth(self) -> dict[str, dict[str, str]]:
        """system -> figure -> growth law."""
        laws: dict[str, dict[str, str]] = {}
        for system in self.systems:
            rows = [m for m in self.of(system) if m.ok]
            ns = [m.n for m in rows]
            laws[system] = {
                figure: growth_law(ns, [float(getattr(m, figure)) for m in rows])
                for figure in FIGURES
            }
        return laws

    def overhead_ratio(self, m: Measurement, *, checkpointed: bool = False) -> float | None:
        """``m``'s overhead over turnplan's at the same N (both with a checkpointer, or both
        without)."""
        reference = next(
            (r for r in self.measurements if r.system == REFERENCE and r.n == m.n), None
        )
        if reference is None:
            return None
        if checkpointed:
            if not reference.checkpointed_overhead_seconds:
                return None
            return m.checkpointed_overhead_seconds / reference.checkpointed_overhead_seconds
        if not reference.overhead_seconds:
            return None
        return m.overhead_seconds / reference.overhead_seconds

    def table(self) -> str:
        header = (
            "| system | N | LLM calls | prompt tokens (sum) | largest prompt | completion tokens "
            f"| shared prefix % | overhead ms/turn | overhead ms/item | overhead x {REFERENCE} "
            "| checkpointed ms/item | checkpointed x turnplan | ok |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
        )
        lines = [header]
        for m in sorted(self.measurements, key=lambda m: (self.systems.index(m.system), m.n)):
            ratio = self.overhead_ratio(m)
            durable = self.overhead_ratio(m, checkpointed=True)
            lines.append(
                f"| {m.system} | {m.n} | {m.calls} | {m.prompt_tokens:,} | "
                f"{m.max_prompt_tokens:,} | {m.completion_tokens:,} | "
                f"{percent(m.shared_prefix)} | "
                f"{m.overhead_ms:.1f} | {m.overhead_ms_per_item:.2f} | "
                f"{'' if ratio is None else f'{ratio:.2f}'} | "
                f"{m.checkpointed_overhead_ms / m.n:.2f} | "
                f"{'' if durable is None else f'{durable:.2f}'} | "
                f"{'yes' if m.ok else 'NO: ' + m.problem} |"
            )
        return "\n".join(lines)

    def growth_table(self) -> str:
        header = "| system | " + " | ".join(FIGURES.values()) + " |"
        lines = [header, "|---|" + "---|" * len(FIGURES)]
        for system, laws in self.growth().items():
            lines.append(f"| {system} | " + " | ".join(laws[f] for f in FIGURES) + " |")
        return "\n".join(lines)

    def _growth_caveat(self) -> str:
        if len({m.n for m in self.measurements}) >= 3:
            return ""
        return "Only two N were measured: every fit is a line through two points.\n\n"

    def markdown(self) -> str:
        meta = "\n".join(f"- {key}: {value}" for key, value in self.meta.items())
        paths = "\n".join(f"- **{name}**: {path}" for name, path in self.paths.items())
        missing = (
            "\n".join(
                f"- **{name}**: not measured: {why}" for name, why in self.unavailable.items()
            )
            or "- none: every system ran."
        )
        return (
            "# N-item turn benchmark\n\n"
            f"{meta}\n\n"
            "## Results\n\n"
            f"{self.table()}\n\n"
            "Calls and tokens: one turn over HTTP (`ChatOpenAI` -> scripted OpenAI-compatible "
            "server, usage = characters of the request JSON / 4). Shared prefix: for each call "
            "after the first, the share of its prompt (tool schemas, then messages) equal to the "
            "previous call's from the start, averaged over the turn: what a prompt cache can "
            "reuse. Overhead: best of the instant runs, wall time of the turn minus time inside "
            "the model; compare ratios, not ms. Checkpointed: the same with a SQLite checkpointer "
            "(`AsyncSqliteSaver` on a file) compiled into each agent, every turn in a thread of "
            "its own: every step's state is written, as `langgraph dev` or a durable deployment "
            "runs it.\n\n"
            + (f"## Harness share of the wall time\n\n{self.share}\n\n" if self.share else "")
            + "## Growth in N (least squares over the N measured)\n\n"
            f"{self.growth_table()}\n\n"
            f"{self._growth_caveat()}" + "## Oracle paths\n\n"
            f"{paths}\n\n"
            "## Not measured\n\n"
            f"{missing}\n"
        )

    def as_json(self) -> str:
        payload: dict[str, Any] = {
            "meta": self.meta,
            "paths": self.paths,
            "measurements": [m.as_dict() for m in self.measurements],
            "growth": self.growth(),
            "unavailable": self.unavailable,
        }
        return json.dumps(payload, indent=2, ensure_ascii=False)
