"""Numbers and Markdown tables as the benchmarks print them (terminal and RESULTS.md alike)."""

from __future__ import annotations

import math
import numbers
import statistics
from collections.abc import Sequence
from typing import Any

MISSING = "–"


def _finite(x: Any) -> bool:
    return isinstance(x, numbers.Real) and math.isfinite(x)


def format_rate(x: float | None, unit: str = "") -> str:
    """3 significant figures with a k/M/G suffix: 20200000 -> "20.2M"; None or NaN -> "–"."""
    if not _finite(x):
        return MISSING
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{suffix}{unit}"
    return f"{x:.3g}{unit}"


def format_ratio(x: float | None) -> str:
    """A speed-up: "2x", "12.5x", "1,024x"; None or NaN -> "–"."""
    if not _finite(x):
        return MISSING
    return f"{x:.3g}x" if x < 1000 else f"{x:,.0f}x"


def format_seconds(x: float | None, digits: int = 1) -> str:
    return MISSING if x is None else f"{x:.{digits}f}"


def format_duration(seconds: float) -> str:
    """Minutes and seconds: 75.4 -> "1:15"."""
    m, s = divmod(round(seconds), 60)
    return f"{m}:{s:02d}"


def format_mean_std(values: Sequence[float | None], fmt: str = "{:.3g}") -> str:
    """ "mean ± std" over the values that are not None (the value alone if there is one)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return MISSING
    if len(vals) == 1:
        return fmt.format(vals[0])
    return f"{fmt.format(statistics.mean(vals))} ± {fmt.format(statistics.pstdev(vals))}"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 1) -> str:
    """A Markdown table, padded so it also reads well in a terminal: the first `left` columns
    left-aligned (text), the rest right-aligned (numbers)."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row):
        padded = [
            c.ljust(w) if i < left else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join("-" * (w + 1) + ("-" if i < left else ":") for i, w in enumerate(widths))
    return "\n".join([line(cells[0]), rule + "|", *(line(r) for r in cells[1:])])


def format_verdict(met: bool | None, undecided: str = "undecided") -> str:
    """A target's outcome: True -> "met", False -> "not met", None -> `undecided`."""
    return {True: "met", False: "not met"}.get(met, undecided)
