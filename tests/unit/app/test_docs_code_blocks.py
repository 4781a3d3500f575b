"""Every code block of README.md and docs/ is run or checked as printed.

- ```python blocks run as scripts in a fresh folder, with no model or database settings from the
  machine (a block that needs a model brings a stand-in one); a ```text block marked
  ``<!-- output -->`` right after one is what it must print. Blocks marked
  ``<!-- example: NAME -->`` need a model server or ``langgraph dev``:
  tests/integration/app/test_readme_examples.py runs those.
- ```bash blocks name only real commands: ``turnplan``, ``langgraph`` and the project's Python
  modules have their arguments parsed by their own parsers, pip extras and pytest paths must
  exist, and anything else must be a known system command.
- ```json blocks parse; ```js blocks pass ``node --check``; ```text blocks are output.

A block opts out only with ``<!-- not run: REASON -->`` on the line before it, and there are few.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

# The MCP example's `stdio_client` binds its default `errlog=sys.stderr` when mcp is first
# imported; imported here, at collection, it is a stream with a file descriptor, not the
# stand-in stderr of whichever test happened to import mcp first.
import mcp.client.stdio  # noqa: F401
import pytest

REPO = Path(__file__).resolve().parents[3]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LANGUAGES = {"python", "bash", "json", "js", "text"}
MAX_OPT_OUTS = 2
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>\S*)\s*$")
MARKER = re.compile(r"^\s*<!-- (?P<marker>.*?) -->\s*$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    code: str
    marker: str
    """The HTML comment on the line right before the fence, without ``<!--``/``-->``, or ""."""

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def read_blocks(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent = len(opening["indent"])
        end = index + 1
        while not re.match(r"^ *```\s*$", lines[end]):
            end += 1
        marker = MARKER.match(lines[index - 1]) if index else None
        code = "\n".join(line[indent:] for line in lines[index + 1 : end]) + "\n"
        found.append(
            Block(path, index + 1, opening["lang"], code, marker["marker"] if marker else "")
        )
        index = end + 1
    return found


BLOCKS = [block for path in DOCS for block in read_blocks(path)]


def of(lang: str, *, marker: str = "") -> list[Any]:
    return [
        pytest.param(block, id=block.name)
        for block in BLOCKS
        if block.lang == lang and block.marker == marker
    ]


def output_after(block: Block) -> str | None:
    """The ``<!-- output -->`` text block right after ``block`` in its file, if any."""
    following = [b for b in BLOCKS if b.path == block.path and b.line > block.line]
    if following and following[0].lang == "text" and following[0].marker == "output":
        return following[0].code
    return None


def test_every_block_has_a_known_language_and_marker() -> None:
    wrong = [
        f"{b.name}: ```{b.lang} <!-- {b.marker} -->"
        for b in BLOCKS
        if b.lang not in LANGUAGES
        or not (
            b.marker in ("", "output")
            or (b.marker.startswith("example: ") and b.lang in ("python", "js"))
            or re.fullmatch(r"not run: \S.{10,}", b.marker)
        )
        or (b.marker == "output" and b.lang != "text")
    ]
    assert not wrong, wrong


def test_opt_outs_are_few() -> None:
    opted_out = [b.name for b in BLOCKS if b.marker.startswith("not run:")]
    assert len(opted_out) <= MAX_OPT_OUTS, opted_out


def test_the_marked_examples_are_the_ones_the_integration_test_runs() -> None:
    runs = (REPO / "tests" / "integration" / "app" / "test_readme_examples.py").read_text()
    named = {b.marker.removeprefix("example: ") for b in BLOCKS if b.marker.startswith("example")}
    assert named == set(re.findall(r'readme_example\("(\w+)"', runs))


def test_no_issue_or_seed_numbers_in_user_facing_text() -> None:
    numbered = re.compile(r"\b(issues?|seeds?)\s+#?\d+", re.I)
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in [*DOCS, REPO / "bench" / "README.md", REPO / "SECURITY.md"]
        for number, line in enumerate(path.read_text().splitlines(), 1)
        for match in numbered.finditer(line)
        if "github.com" not in line
    ]
    assert not found, found


# ---- python ---------------------------------------------------------------------------------


@pytest.fixture
def fresh_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A new working folder, no model or database settings, and ``turnplan`` on the PATH as
    this checkout's command (an MCP client in a block starts it)."""
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith(("TURNPLAN_", "OPENAI_", "ANTHROPIC_")):
            monkeypatch.delenv(name)
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    command = bin_dir / "turnplan"
    command.write_text(
        f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m agent.app.cli "$@"\n'
    )
    command.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


def run_python(block: Block) -> str:
    """Run ``block`` as a script (top-level ``await`` through asyncio); what it printed."""
    code = compile(block.code, block.name, "exec", flags=0x2000)  # PyCF_ALLOW_TOP_LEVEL_AWAIT
    namespace: dict[str, Any] = {"__name__": "__main__"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        result = eval(code, namespace)  # the block is this repository's own documentation
        if asyncio.iscoroutine(result):
            asyncio.run(result)
    return printed.getvalue()


@pytest.mark.parametrize("block", of("python"))
def test_python_block_runs_as_printed(block: Block, fresh_folder: Path) -> None:
    printed = run_python(block)
    expected = output_after(block)
    if expected is not None:
        assert printed == expected


@pytest.mark.parametrize("block", of("python", marker="output") + of("text", marker="output"))
def test_every_output_block_follows_a_python_block(block: Block) -> None:
    before = [b for b in BLOCKS if b.path == block.path and b.line < block.line]
    assert before and before[-1].lang == "python" and before[-1].marker == ""


# ---- json, js -------------------------------------------------------------------------------


@pytest.mark.parametrize("block", of("json"))
def test_json_block_parses(block: Block) -> None:
    json.loads(block.code)


@pytest.mark.parametrize("block", [pytest.param(b, id=b.name) for b in BLOCKS if b.lang == "js"])
def test_js_block_parses(block: Block, tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = tmp_path / "block.mjs"
    script.write_text(block.code)
    checked = subprocess.run([node, "--check", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


# ---- bash -----------------------------------------------------------------------------------

SYSTEM_COMMANDS = {"apt-get", "cd", "createdb", "mkdir", "pnpm", "redis-server"}
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
EXTRAS = set(PYPROJECT["project"]["optional-dependencies"])
MARKERS = {m.split(":")[0] for m in PYPROJECT["tool"]["pytest"]["ini_options"]["markers"]}
SEPARATORS = {"&&", "||", ";", "&", "|", "(", ")"}


def commands(script: str) -> Iterator[list[str]]:
    """The simple commands of a bash block, environment assignments left out."""
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        command: list[str] = []
        for token in [*lexer, ";"]:
            if token not in SEPARATORS:
                command.append(token)
                continue
            while command and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", command[0], re.S):
                command.pop(0)
            if command:
                yield command
            command = []


class Parsed(Exception):
    """Raised once a module's parser has accepted the arguments, before the module acts."""


def parse_module_arguments(module: str, args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Run ``python -m module args``'s argument parsing only."""
    known = {"agent.app.server_worker", "bench.multiworker"}
    assert module in known, f"python -m {module}: not a module these docs may name"
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(self: argparse.ArgumentParser, *a: Any, **k: Any) -> Any:
        original(self, *a, **k)
        raise Parsed

    with monkeypatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
        main = __import__(module, fromlist=["main"]).main
        with pytest.raises(Parsed):
            main(args)


def check_python(args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    while args and args[0].startswith("-") and args[0] != "-m":
        args = args[2:] if args[0] == "-W" else args[1:]
    assert args[:1] == ["-m"], f"python {args}: only `python -m MODULE` is documented"
    module, rest = args[1], args[2:]
    if module == "venv":
        assert len(rest) == 1
    elif module == "pytest":
        for index, arg in enumerate(rest):
            if index and rest[index - 1] == "-m":
                assert arg in MARKERS, f"no pytest marker {arg}"
            elif not arg.startswith("-"):
                assert (REPO / arg).exists(), f"pytest path {arg} does not exist"
    else:
        parse_module_arguments(module, rest, monkeypatch)


def check_pip(args: list[str]) -> None:
    assert args[0] == "install", args
    for arg in args[1:]:
        extras = re.fullmatch(r"\.\[(.*)\]", arg)
        if extras:
            unknown = set(extras[1].split(",")) - EXTRAS
            assert not unknown, f"pip extras {unknown} are not in pyproject.toml"


def check_turnplan(args: list[str]) -> None:
    from agent.app.cli import build_parser

    build_parser().parse_args(args)


def check_langgraph(args: list[str]) -> None:
    from langgraph_cli.cli import cli

    subcommand = cli.get_command(None, args[0])  # type: ignore[arg-type]
    assert subcommand is not None, f"langgraph has no command {args[0]}"
    subcommand.make_context(args[0], args[1:])


def check_command(words: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    program, args = Path(words[0]).name, words[1:]
    if program == "turnplan":
        check_turnplan(args)
    elif program == "langgraph":
        check_langgraph(args)
    elif program in ("python", "python3"):
        check_python(args, monkeypatch)
    elif program == "pip":
        check_pip(args)
    elif program in ("ruff", "mypy"):
        assert not args or args[0] in ("check", "format", "--strict"), words
    elif program == "npm":
        scripts = json.loads((REPO / "ui" / "package.json").read_text())["scripts"]
        assert args[0] == "ci" or args[0] in scripts, f"ui/package.json has no script {args[0]}"
    elif program == "export":
        assert all(re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", arg, re.S) for arg in args), args
    elif program == "cp":
        sources = [arg for arg in args[:-1] if not arg.startswith("-")]
        assert all((REPO / source).exists() for source in sources), sources
    else:
        assert program in SYSTEM_COMMANDS, f"unknown command {program!r}: {' '.join(words)}"


@pytest.mark.parametrize("block", of("bash"))
def test_bash_block_names_real_commands_and_flags(
    block: Block, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)  # langgraph checks that a --config file exists
    checked = list(commands(block.code))
    assert checked
    for words in checked:
        try:
            check_command(words, monkeypatch)
        except SystemExit as exit_:
            pytest.fail(f"{block.name}: {' '.join(words)} is refused by its parser ({exit_})")


# ---- the settings table ---------------------------------------------------------------------


def shown_default(value: object) -> str:
    """A ``Context`` default as README's table writes it."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f"`{value}`"
    if isinstance(value, list):
        return f"`{json.dumps(value)}`"
    return str(value)


def test_readme_settings_table_is_context_with_its_defaults() -> None:
    from agent.context import Context

    configure = (REPO / "README.md").read_text().split("\n## Configure\n", 1)[1]
    configure = configure.split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", configure, re.M)
    defaults = Context()
    expected = [
        (name, shown_default(getattr(defaults, name)))
        for name in (field.name for field in fields(Context))
    ]
    assert [(name, shown.strip()) for name, shown in rows] == expected


def test_docs_name_every_error_code_and_table() -> None:
    from agent.errors import ErrorCode
    from storage.models import Base

    toolsets = (REPO / "docs" / "toolsets.md").read_text()
    assert [code for code in ErrorCode if f"| `{code}` |" not in toolsets] == []
    deploying = (REPO / "docs" / "deploying.md").read_text()
    assert [table for table in Base.metadata.tables if f"`{table}`" not in deploying] == []


def anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of ``path``."""
    headings = re.findall(r"^#+ (.+)$", path.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def test_links_between_readme_and_docs_reach_a_file_and_heading() -> None:
    broken = []
    for path in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            if not linked.exists() or (anchor and anchor not in anchors(linked)):
                broken.append(f"{path.relative_to(REPO)}: {target}")
    assert not broken, broken


def test_readme_is_read_in_five_minutes_in_a_newcomers_order() -> None:
    """At most 400 lines, and the sections a newcomer needs in the order they need them."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 400
    sections = re.findall(r"^## (.+)$", readme, re.M)
    order = ["Quick start", "Embed", "Serve", "Configure", "Extend", "Limits"]
    assert [s for s in sections if s in order] == order
    assert readme.index("## Embed") < len("\n".join(readme.splitlines()[:150]))
