"""Command-line values parsed one way: comma-separated lists ("1,16,4096", "jaxsim,gymnax",
"all") and time limits."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence


def split_list(text: str) -> list[str]:
    """The comma-separated items of `text`, stripped, empty ones dropped, duplicates once."""
    return list(dict.fromkeys(item.strip() for item in text.split(",") if item.strip()))


def int_list(text: str) -> tuple[int, ...]:
    """An argparse type: comma-separated integers >= 1."""
    try:
        values = tuple(int(v) for v in split_list(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected integers >= 1, got {text!r}")
    return values


def count(text: str) -> int:
    """An argparse type: a count, one integer >= 1."""
    values = int_list(text)
    if len(values) != 1:
        raise argparse.ArgumentTypeError(f"expected one integer >= 1, got {text!r}")
    return values[0]


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds > 0 (argparse names the flag if not)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds > 0, got {text!r}")
    return value


def unknown_names(names: Sequence[str], valid: Sequence[str], what: str) -> str | None:
    """None if every name is one of `valid`, else the message that says which are not."""
    unknown = [n for n in names if n not in valid]
    if not unknown:
        return None
    return f"unknown {what} {', '.join(map(repr, unknown))}; choose from {', '.join(valid)}"


def name_list(
    valid: Sequence[str], what: str, all_means_every: bool = True, none: bool = False
) -> Callable[[str], tuple[str, ...]]:
    """An argparse type: comma-separated names, each one of `valid`; with `all_means_every`,
    'all' stands for every one of them; with `none`, 'none' (or nothing) for none."""
    words = [w for w, on in (("'all'", all_means_every), ("'none'", none)) if on]

    def parse(text: str) -> tuple[str, ...]:
        if all_means_every and text.strip() == "all":
            return tuple(valid)
        if none and text.strip() in ("none", ""):
            return ()
        names = split_list(text)
        problem = unknown_names(names, valid, what) if names else f"no {what} given"
        if problem:
            or_words = f" (or {', '.join(words)})" if words else ""
            raise argparse.ArgumentTypeError(problem + or_words)
        return tuple(names)

    return parse
