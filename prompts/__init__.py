"""Prompt texts live as Markdown files beside this module; this loader reads and renders them.

Placeholders use ``string.Template`` syntax (``$name`` / ``${name}``) so prompts may contain JSON
braces freely. A missing placeholder value is an error, never silently left in the prompt.

A deployment may replace any of the files with its own: a folder of ``<name>.md`` files
(``build_graph(prompts_dir=...)``, else the ``TURNPLAN_PROMPTS_DIR`` environment variable) is
read first, and every file it does not have comes from the shipped ones. ``Prompts.check``
refuses, when the graph is built, a folder whose files the code could not fill in as it fills
the shipped ones (docs/prompts.md lists the files and their variables).

A graph (``build_graph``) and a ``TurnPlanMiddleware`` each make one ``Prompts`` and hand it, as
an argument, to everything that writes a message from a prompt (the prompt builders, the turn's
final answers, the tools they build; a worker finds its delegating graph's in its run's config,
``CONFIG_KEY``), so concurrent runs of graphs with different folders never mix. What is given
none (scripts, benchmarks, tests) uses the environment's (``chosen``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

PROMPTS_DIR_ENV = "TURNPLAN_PROMPTS_DIR"
"""A folder of prompt files that replace the shipped ones, file by file."""

CONFIG_KEY = "turnplan_prompts"
"""The ``configurable`` key under which a graph hands its ``Prompts`` to a run it starts (a
worker it delegates to: ``agent.tools.delegate``)."""


class PromptFolderError(ValueError):
    """A prompt folder that cannot be used: missing, a file that is not a prompt, or a file
    whose placeholders are not the ones the code fills in. The message names the file and
    what to change."""


@cache
def shipped_names() -> frozenset[str]:
    """The names of the shipped prompt files (``<name>.md`` under ``prompts/``)."""
    return frozenset(
        entry.name.removesuffix(".md")
        for entry in resources.files(__package__).iterdir()
        if entry.name.endswith(".md")
    )


@cache
def _read(folder: str | None, name: str) -> str:
    """The text of prompt ``name``: ``<folder>/<name>.md`` when there is one, else the shipped
    file. Read once per process and folder."""
    if folder is not None:
        own = Path(folder) / f"{name}.md"
        if own.is_file():
            return own.read_text(encoding="utf-8").strip()
    return resources.files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8").strip()


def variables(text: str) -> frozenset[str]:
    """The ``$placeholders`` of a prompt text."""
    return frozenset(Template(text).get_identifiers())


@dataclass(frozen=True)
class Prompts:
    """The prompt texts of one graph: ``folder``'s files over the shipped ones (no folder: the
    shipped ones only)."""

    folder: str | None = None

    @classmethod
    def at(cls, folder: str | Path | None = None) -> Prompts:
        """The prompts of ``folder``, else of the ``TURNPLAN_PROMPTS_DIR`` folder, else the
        shipped ones."""
        chosen = folder if folder is not None else os.environ.get(PROMPTS_DIR_ENV) or None
        return cls(str(Path(chosen).expanduser().resolve()) if chosen is not None else None)

    def load(self, name: str) -> str:
        """The text of prompt ``name``."""
        return _read(self.folder, name)

    def render(self, name: str, **values: object) -> str:
        """Prompt ``name`` with its ``$placeholders`` filled in."""
        return Template(self.load(name)).substitute({key: str(v) for key, v in values.items()})

    def load_all(self) -> None:
        """Read every prompt into memory, so no later use touches the disk (async code calls
        this through ``asyncio.to_thread``)."""
        for name in shipped_names():
            self.load(name)

    def check(self) -> None:
        """Raise ``PromptFolderError`` unless every file of the folder can stand in for the
        shipped file of its name: a known name, not empty, and exactly the shipped file's
        ``$placeholders`` (the values the code fills in), with any other ``$`` written ``$$``.
        A shipped file without placeholders is used as it is, so its replacement may hold any
        text. Reads every prompt, so later uses are served from memory."""
        if self.folder is None:
            return
        folder = Path(self.folder)
        if not folder.is_dir():
            raise PromptFolderError(
                f"The prompt folder {folder} does not exist or is not a folder "
                f"(build_graph(prompts_dir=...) or {PROMPTS_DIR_ENV})."
            )
        known = shipped_names()
        problems = []
        for path in sorted(folder.glob("*.md")):
            name = path.stem
            if name not in known:
                problems.append(
                    f"{path.name} is not one of turnplan's prompts; the files are: "
                    f"{', '.join(f'{n}.md' for n in sorted(known))}."
                )
                continue
            problems.extend(_file_problems(path, self.load(name), _read(None, name)))
        if problems:
            raise PromptFolderError(
                f"The prompt folder {folder} cannot be used:\n- " + "\n- ".join(problems)
            )
        self.load_all()


def _file_problems(path: Path, text: str, shipped: str) -> list[str]:
    """What keeps ``text`` (the file at ``path``) from replacing the shipped prompt ``shipped``."""
    if not text:
        return [f"{path.name} is empty; delete it to use the shipped one."]
    wanted = variables(shipped)
    if not wanted:
        return []
    template = Template(text)
    if not template.is_valid():
        return [
            f"{path.name} has a '$' that is not a placeholder; write a literal '$' as '$$'. "
            f"Its placeholders are: {_listed(wanted)}."
        ]
    found = variables(text)
    problems = []
    if unknown := found - wanted:
        problems.append(
            f"{path.name} has unknown placeholder(s) {_listed(unknown)}; it takes only "
            f"{_listed(wanted)}."
        )
    if missing := wanted - found:
        problems.append(
            f"{path.name} lacks {_listed(missing)}; every one of {_listed(wanted)} must appear."
        )
    return problems


def _listed(names: frozenset[str]) -> str:
    return ", ".join(f"${name}" for name in sorted(names))


def environment_prompts() -> Prompts:
    """The prompts outside any graph: the ``TURNPLAN_PROMPTS_DIR`` folder's over the shipped
    ones (read again when the variable changes)."""
    return _environment_prompts(os.environ.get(PROMPTS_DIR_ENV))


@cache
def _environment_prompts(folder: str | None) -> Prompts:
    """``Prompts.at`` for the environment's folder, made once per value of the variable."""
    return Prompts.at(folder or None)


def chosen(prompts: Prompts | None) -> Prompts:
    """``prompts`` (a graph's or a middleware's, passed down to what renders), else the
    default ones: outside a graph, the environment's (``TURNPLAN_PROMPTS_DIR``, else the shipped
    ones)."""
    return prompts if prompts is not None else environment_prompts()


def prompts_in(config: Mapping[str, Any] | None) -> Prompts:
    """The ``Prompts`` a run's config carries (``CONFIG_KEY``: a worker's run, started by the
    graph that delegated to it), else the default ones (``chosen``)."""
    carried = ((config or {}).get("configurable") or {}).get(CONFIG_KEY)
    return chosen(carried if isinstance(carried, Prompts) else None)


def load_prompt(name: str) -> str:
    """The text of ``<name>.md`` among the environment's prompts (scripts, benchmarks, tests:
    code inside a graph is handed its graph's ``Prompts``)."""
    return environment_prompts().load(name)


def render_prompt(name: str, **values: object) -> str:
    """``<name>.md`` among the environment's prompts, with its ``$placeholders`` filled in."""
    return environment_prompts().render(name, **values)
