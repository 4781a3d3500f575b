"""README and docs as a newcomer copies them: the examples marked ``<!-- example: NAME -->`` (in
README.md and docs/) are whole scripts (no top-level ``await``;
tests/integration/app/test_readme_examples.py runs them), and every install command uses the
project's own pip."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def marked_examples() -> dict[str, str]:
    found = [
        example
        for path in DOCS
        for example in re.findall(
            r"<!-- example: (\w+) -->\n```python\n(.*?)```", path.read_text(), re.S
        )
    ]
    examples = dict(found)
    assert len(examples) == len(found), "an example name is marked twice"
    return examples


def test_readme_and_docs_mark_the_python_subgraph_sdk_and_middleware_examples() -> None:
    assert set(marked_examples()) == {"python", "subgraph", "sdk", "middleware"}


@pytest.mark.parametrize("name", ["python", "subgraph", "sdk", "middleware"])
def test_each_example_is_a_script_that_runs_its_async_code(name: str) -> None:
    source = marked_examples()[name]
    tree = compile(source, f"README example {name}", "exec", flags=ast.PyCF_ONLY_AST)
    assert isinstance(tree, ast.Module)  # top-level `async with`/`await` would not compile
    last = tree.body[-1]
    assert isinstance(last, ast.Expr) and ast.unparse(last) == "asyncio.run(main())"


def test_install_commands_use_the_venvs_pip() -> None:
    bare = []
    for path in DOCS:
        for block in re.findall(r"```bash\n(.*?)```", path.read_text(), re.S):
            for line in block.splitlines():
                command = line.split("#", 1)[0]
                if re.search(r"(^|[;&|]\s*)pip3? install", command.strip()):
                    bare.append(f"{path.name}: {line.strip()}")
    assert not bare, bare
