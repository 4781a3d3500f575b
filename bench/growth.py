"""Growth laws in N: least-squares fits small enough to read, with no numeric library.

A figure is called quadratic when the N² term of a quadratic fit is positive and worth more than
10 % of the figure at the largest N; otherwise it is linear (a·N + b), or constant when even the
linear term is under 10 %. A significant negative N² term (growth that flattens, e.g. once a
history window is full) is reported as "linear (flattening)". With fewer than three distinct
N only the linear fit is possible (the report says so).
"""

from __future__ import annotations

from collections.abc import Sequence

SIGNIFICANT = 0.10


def _solve(matrix: list[list[float]], vector: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting for the small normal equations here."""
    size = len(vector)
    rows = [[*matrix[i], vector[i]] for i in range(size)]
    for col in range(size):
        pivot = max(range(col, size), key=lambda r: abs(rows[r][col]))
        rows[col], rows[pivot] = rows[pivot], rows[col]
        for r in range(size):
            if r != col and rows[col][col]:
                factor = rows[r][col] / rows[col][col]
                rows[r] = [x - factor * y for x, y in zip(rows[r], rows[col], strict=True)]
    return [rows[i][size] / rows[i][i] if rows[i][i] else 0.0 for i in range(size)]


def polyfit(xs: Sequence[float], ys: Sequence[float], degree: int) -> list[float]:
    """Coefficients, highest power first, of the least-squares polynomial of ``degree``."""
    powers = range(degree, -1, -1)
    matrix = [[sum(x ** (p + q) for x in xs) for q in powers] for p in powers]
    vector = [sum(y * x**p for x, y in zip(xs, ys, strict=True)) for p in powers]
    return _solve(matrix, vector)


def _num(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def _plus(value: float) -> str:
    """`` + x`` or `` - x``, so formulas read naturally."""
    return f" - {_num(-value)}" if value < 0 else f" + {_num(value)}"


def growth_law(ns: Sequence[int], values: Sequence[float]) -> str:
    """The growth class (constant, linear or quadratic) with the fitted formula."""
    distinct = sorted(set(ns))
    if len(distinct) < 2:
        return "n/a (one N)"
    n_max = max(ns)
    scale = max(abs(v) for v in values) or 1.0
    flattening = False
    if len(distinct) >= 3:
        c, a, b = polyfit(ns, values, 2)
        if abs(c) * n_max**2 > SIGNIFICANT * scale:
            if c > 0:
                return f"quadratic: {_num(c)}·N²{_plus(a)}·N{_plus(b)}"
            flattening = True
    a, b = polyfit(ns, values, 1)
    if abs(a) * n_max <= SIGNIFICANT * scale:
        return f"constant: ≈ {_num(sum(values) / len(values))}"
    kind = "linear (flattening)" if flattening else "linear"
    return f"{kind}: {_num(a)}·N{_plus(b)}"
