"""The field checks a suite's record schema is written with: each problem names its field."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from typing import Any

_MISSING = object()
Check = Callable[[Any], "str | None"]
Fields = tuple[tuple[str, Check], ...]


def positive(x: Any) -> str | None:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return f"is {x!r}, not a number"
    if not math.isfinite(x) or x <= 0:
        return f"is {x!r}: a rate, time or ratio must be a finite number > 0"
    return None


def non_negative(x: Any) -> str | None:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return f"is {x!r}, not a number"
    if not math.isfinite(x) or x < 0:
        return f"is {x!r}: must be a finite number >= 0"
    return None


def optional(check: Check) -> Check:
    return lambda x: None if x is None else check(x)


def of_type(*types: type) -> Check:
    names = " or ".join(t.__name__ for t in types)
    return lambda x: None if isinstance(x, types) else f"is {x!r}, not {names}"


STR = of_type(str)
INT = of_type(int)
LIST = of_type(list)
DICT = of_type(dict)
NUMBER = of_type(int, float)
BOOL = of_type(bool)


def _get(obj: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        if not isinstance(obj, dict) or key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


def check(obj: Any, where: str, fields: Fields, required: bool = True) -> list[str]:
    """The problems of `obj`'s `fields` (dotted names, each with its check), named from `where`;
    a missing field is one if `required`."""
    problems = []
    for dotted, is_bad in fields:
        value = _get(obj, dotted)
        name = f"{where}.{dotted}" if where else dotted
        if value is _MISSING:
            if required:
                problems.append(f"lacks field '{name}'")
        elif (why := is_bad(value)) is not None:
            problems.append(f"field '{name}' {why}")
    return problems


def _label(point: dict[str, Any]) -> str:
    keys = ("impl", "case", "backend", "env_id", "policy", "outputs", "num_envs", "k")
    return " ".join(f"{k}={point[k]}" for k in keys if point.get(k) is not None)


def points(data: dict[str, Any], fields: Fields, ok: Fields = (), not_ok: Fields = ()) -> list[str]:
    """The problems of `data`'s "results" list: every point has `fields` (one of them "status"),
    then a point whose status is "ok" has `ok`, any other `not_ok`."""
    found = data.get("results")
    if found is None:
        return ["lacks field 'results'"]
    if not isinstance(found, list):
        return [f"field 'results' is {type(found).__name__}, not a list"]
    problems = []
    for i, point in enumerate(found):
        if not isinstance(point, dict):
            problems.append(f"field 'results[{i}]' is not an object")
            continue
        where = f"results[{i}]"
        mine = check(point, where, fields)
        if not mine:
            mine = check(point, where, ok if point["status"] == "ok" else not_ok)
        problems += [f"{p} ({_label(point)})" for p in mine]
    return problems


# A profiled case (`benchmarks.breakdown.measure.measure`): the breakdown and offpolicy points.
PROFILED = (("wall_s", positive), ("steps_per_s", positive), ("category_shares", DICT))
# A throughput point that was timed: the median and the spread of its rates.
TIMED = (
    ("steps_per_s.median", positive),
    ("steps_per_s.min", positive),
    ("steps_per_s.max", positive),
    ("compile_s", optional(non_negative)),
)
_TARGET = (("name", STR), ("status", STR), ("value", optional(positive)))


def base_problems(
    data: Any, suite_problems: Callable[[dict[str, Any]], list[str]] | None
) -> list[str]:
    """What every record needs (a benchmark, provenance, well-formed targets) and what its
    suite's schema (`suite_problems`, if any) needs."""
    if not isinstance(data, Mapping):
        return ["is not a JSON object"]
    problems = check(data, "", (("benchmark", STR), ("provenance", DICT)))
    if suite_problems is not None:
        problems += suite_problems(data)
    for i, target in enumerate(data.get("targets") or []):
        problems += check(target, f"targets[{i}]", _TARGET)
    return problems
