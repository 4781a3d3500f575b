"""The size rule for the code a newcomer reads: no function in ``agent/``, ``storage/`` or
``prompts/`` has more than 80 lines of its own (its nested functions and classes are theirs), so
each can be read on one screen."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agent", "storage", "prompts")
LIMIT = 80
Function = ast.FunctionDef | ast.AsyncFunctionDef
Nested = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def own_lines(function: Function) -> int:
    """The function's lines, without those of the functions and classes defined inside it."""
    assert function.end_lineno is not None
    lines = set(range(function.lineno, function.end_lineno + 1))
    for inner in ast.walk(function):
        if inner is not function and isinstance(inner, Nested) and inner.end_lineno:
            lines -= set(range(inner.lineno, inner.end_lineno + 1))
    return len(lines)


def too_long() -> dict[str, int]:
    """``path:name`` of every function over the limit, with its own lines."""
    found: dict[str, int] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, Function) and (size := own_lines(node)) > LIMIT:
                    found[f"{path.relative_to(ROOT).as_posix()}:{node.name}"] = size
    return found


def test_the_count_leaves_out_nested_functions() -> None:
    source = "def outer():\n    x = 1\n    def inner():\n        return 2\n    return x\n"
    (outer,) = [node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)]
    assert own_lines(outer) == 3


def test_no_function_has_more_than_80_lines_of_its_own() -> None:
    assert too_long() == {}
