"""Prompt texts live as Markdown files beside this module; this loader reads and renders them.

Placeholders use ``string.Template`` syntax (``$name`` / ``${name}``) so prompts may contain JSON
braces freely. A missing placeholder value is an error, never silently left in the prompt.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from string import Template


@cache
def load_prompt(name: str) -> str:
    """The text of ``prompts/<name>.md``, read once per process."""
    return resources.files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8").strip()


def load_all_prompts() -> None:
    """Read every prompt file into the cache. Async code calls this once through
    ``asyncio.to_thread`` so no later prompt use touches the disk on the event loop."""
    for entry in resources.files(__package__).iterdir():
        if entry.name.endswith(".md"):
            load_prompt(entry.name.removesuffix(".md"))


def render_prompt(name: str, **values: object) -> str:
    """``prompts/<name>.md`` with its ``$placeholders`` filled in."""
    return Template(load_prompt(name)).substitute({key: str(v) for key, v in values.items()})
