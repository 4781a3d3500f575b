"""Arithmetic questions the compact profile answers itself ("What is 12 times 12?").

Why: the embedded 270M model, asked arithmetic, repeated the question, or with examples to
follow answered "12 times 12 is 14" (measured): a wrong number said as an answer is worse than
none. A question that is only one operation on two numbers is computed exactly here; every
other question still goes to the model.
"""

from __future__ import annotations

import re
from decimal import Decimal, DivisionByZero, InvalidOperation

_NUMBER = r"-?\d+(?:\.\d+)?"
_OPERATORS = {
    "plus": "+",
    "+": "+",
    "minus": "-",
    "-": "-",
    "times": "*",
    "x": "*",
    "\u00d7": "*",
    "*": "*",
    "multiplied by": "*",
    "divided by": "/",
    "/": "/",
    "÷": "/",
    "over": "/",
}
_QUESTION = re.compile(
    rf"^(?:what(?:'s| is)|how much is|calculate|compute)\s+(?P<a>{_NUMBER})\s*"
    r"(?P<op>plus|\+|minus|-|times|x|\u00d7|\*|multiplied by|divided by|/|÷|over)\s*"
    rf"(?P<b>{_NUMBER})\s*\??$",
    re.IGNORECASE,
)


def arithmetic_answer(question: str) -> str | None:
    """The answer to ``question`` when it is one operation on two numbers, else None."""
    match = _QUESTION.match(" ".join(question.split()).rstrip(" .!"))
    if match is None:
        return None
    a, b = Decimal(match["a"]), Decimal(match["b"])
    operator = _OPERATORS[match["op"].casefold()]
    try:
        value = {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else None}[operator]
    except (DivisionByZero, InvalidOperation):
        value = None
    if value is None:
        return f"{match['a']} {match['op']} {match['b']} has no answer: you cannot divide by zero."
    shown = value.quantize(Decimal("0.0001")) if operator == "/" else value
    about = "about " if shown != value else ""
    return f"{match['a']} {match['op']} {match['b']} is {about}{shown.normalize():f}."
