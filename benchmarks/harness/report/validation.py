"""What the results report requires of a record, field by field: each problem names its field."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

_MISSING = object()


def _positive(x: Any) -> str | None:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return f"is {x!r}, not a number"
    if not math.isfinite(x) or x <= 0:
        return f"is {x!r}: a rate, time or ratio must be a finite number > 0"
    return None


def _non_negative(x: Any) -> str | None:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return f"is {x!r}, not a number"
    if not math.isfinite(x) or x < 0:
        return f"is {x!r}: must be a finite number >= 0"
    return None


def _optional(check: Callable[[Any], str | None]) -> Callable[[Any], str | None]:
    return lambda x: None if x is None else check(x)


def _of_type(*types: type) -> Callable[[Any], str | None]:
    names = " or ".join(t.__name__ for t in types)
    return lambda x: None if isinstance(x, types) else f"is {x!r}, not {names}"


_STR = _of_type(str)
_INT = _of_type(int)
_LIST = _of_type(list)
_DICT = _of_type(dict)
_NUMBER = _of_type(int, float)


def _get(obj: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        if not isinstance(obj, dict) or key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


def _check(
    obj: Any, where: str, fields: tuple[tuple[str, Callable], ...], required: bool = True
) -> list[str]:
    problems = []
    for dotted, check in fields:
        value = _get(obj, dotted)
        name = f"{where}.{dotted}" if where else dotted
        if value is _MISSING:
            if required:
                problems.append(f"lacks field '{name}'")
        elif (why := check(value)) is not None:
            problems.append(f"field '{name}' {why}")
    return problems


# A profiled case (benchmarks.breakdown.measure): the breakdown and offpolicy suites' points.
_PROFILED = (("wall_s", _positive), ("steps_per_s", _positive), ("category_shares", _DICT))
# Fields of every point in "results", by benchmark; then those of a point with status "ok".
_POINT = {
    "rollout_throughput": (("impl", _STR), ("num_envs", _INT), ("status", _STR)),
    "fusion": (
        ("env_id", _STR),
        ("policy", _STR),
        ("outputs", _STR),
        ("num_envs", _INT),
        ("backend", _STR),
        ("k", _optional(_INT)),
        ("status", _STR),
    ),
    "breakdown": (("case", _STR), ("status", _STR)),
    "offpolicy": (("algorithm", _STR), ("env", _STR), ("case", _STR), ("status", _STR)),
    "adapters": (("env_id", _STR), ("impl", _STR), ("num_envs", _INT), ("status", _STR)),
}
_OK_POINT = {
    "rollout_throughput": (
        ("steps_per_s.median", _positive),
        ("steps_per_s.min", _positive),
        ("steps_per_s.max", _positive),
        ("compile_s", _optional(_non_negative)),
    ),
    "fusion": (("steps_per_s.median", _positive), ("compile_s", _optional(_non_negative))),
    "breakdown": _PROFILED,
    "offpolicy": _PROFILED,
    "adapters": (
        ("steps_per_s.median", _positive),
        ("steps_per_s.min", _positive),
        ("steps_per_s.max", _positive),
        ("compile_s", _optional(_non_negative)),
    ),
}
_NOT_OK_POINT = {"rollout_throughput": (("reason", _STR),), "adapters": (("reason", _STR),)}
_TARGET = (("name", _STR), ("status", _STR), ("value", _optional(_positive)))
_PPO_RUN = (("seeds", _INT), ("target", _NUMBER), ("sps_whole_loop", _positive))
_SB3 = (("seeds_reached", _INT), ("mean_sps_whole_loop", _positive), ("runs", _LIST))
_OFFPOLICY_COMPARISON = (
    ("env", _STR),
    ("on_policy", _STR),
    ("off_policy", _STR),
    ("on_policy_simulation_share", _non_negative),
    ("off_policy_simulation_share", _non_negative),
    ("ratio", _optional(_positive)),
)
_SOLVE_CASE = (
    ("env", _STR),
    ("target", _NUMBER),
    ("jaxsim.seeds", _INT),
    ("jaxsim.seeds_reached", _INT),
    ("jaxsim.train_wall_s_per_seed", _positive),
    ("jaxsim.compile_s_per_seed", _non_negative),
    ("sb3", _DICT),
    ("comparison", _DICT),
    ("comparison.speedup", _optional(_positive)),
)
_SOLVE_SB3 = (
    ("sb3.seeds", _INT),
    ("sb3.seeds_reached", _INT),
    ("sb3.train_wall_s_per_seed", _positive),
    ("sb3.runs", _LIST),
)
_SIZES_ROW = (
    ("num_particles", _INT),
    ("outputs", _STR),
    ("model.state_bytes_per_env", _positive),
    ("model.scan_bytes_per_step", _positive),
    ("model.fused_bytes_per_step", _DICT),
    ("model.predicted_ratio", _DICT),
    ("measured_ratio", _optional(_positive)),
    ("check", _DICT),
    ("points", _LIST),
)
_SCALING_ROW = (
    ("env", _STR),
    ("backend", _STR),
    ("devices", _INT),
    ("mesh.env_steps_per_s", _positive),
    ("unsharded.env_steps_per_s", _positive),
    ("speedup", _positive),
)
_PPO_COMPARISON = (
    ("speedup", _optional(_positive)),
    ("speedup_excluding_jaxsim_compile", _optional(_positive)),
)


def _label(point: dict[str, Any]) -> str:
    keys = ("impl", "case", "backend", "env_id", "policy", "outputs", "num_envs", "k")
    return " ".join(f"{k}={point[k]}" for k in keys if point.get(k) is not None)


def _points(data: dict[str, Any], benchmark: str) -> list[str]:
    points = data.get("results")
    if points is None:
        return ["lacks field 'results'"]
    if not isinstance(points, list):
        return [f"field 'results' is {type(points).__name__}, not a list"]
    problems = []
    for i, point in enumerate(points):
        if not isinstance(point, dict):
            problems.append(f"field 'results[{i}]' is not an object")
            continue
        where = f"results[{i}]"
        mine = _check(point, where, _POINT[benchmark])
        if not mine:
            extra = _OK_POINT if point["status"] == "ok" else _NOT_OK_POINT
            mine = _check(point, where, extra.get(benchmark, ()))
        problems += [f"{p} ({_label(point)})" for p in mine]
    return problems


def _ppo(data: dict[str, Any]) -> list[str]:
    problems = _check(data, "", (("jaxsim", _DICT),))
    for env_id, run in (data.get("jaxsim") or {}).items():
        problems += _check(run, f"jaxsim.{env_id}", _PPO_RUN)
    sb3 = data.get("sb3") or {}
    if sb3.get("runs"):
        problems += _check(sb3, "sb3", _SB3)
    return problems + _check(data.get("comparison"), "comparison", _PPO_COMPARISON, False)


def _scaling(data: dict[str, Any]) -> list[str]:
    problems = _check(data, "", (("num_envs", _INT), ("steps", _INT), ("results", _LIST)))
    for i, res in enumerate(data.get("results") or []):
        where = f"results[{i}]"
        problems += _check(res, where, (("any_done_loop.step_us", _positive), ("rows", _LIST)))
        for j, row in enumerate(res.get("rows") or [] if isinstance(res, dict) else []):
            problems += _check(row, f"{where}.rows[{j}]", _SCALING_ROW)
    return problems


def _offpolicy(data: dict[str, Any]) -> list[str]:
    rows = data.get("comparison")
    if not isinstance(rows, list):
        return _check(data, "", (("comparison", _LIST),))
    problems = []
    for i, row in enumerate(rows):
        problems += _check(row, f"comparison[{i}]", _OFFPOLICY_COMPARISON)
    # Older records say in a sentence what they did not measure; newer ones carry a dict.
    loops = data.get("gymnasium_loops")
    if isinstance(loops, dict):
        problems += _check(loops, "gymnasium_loops", (("measured", _of_type(bool)),))
        if loops.get("measured") is True:
            problems += _check(loops, "gymnasium_loops", (("comparison", _LIST),))
            for i, row in enumerate(loops.get("comparison") or []):
                problems += _check(row, f"gymnasium_loops.comparison[{i}]", _OFFPOLICY_COMPARISON)
        elif loops.get("measured") is False:
            problems += _check(loops, "gymnasium_loops", (("reason", _STR),))
    return problems


def _offpolicy_solve(data: dict[str, Any]) -> list[str]:
    cases = data.get("cases")
    if not isinstance(cases, dict) or not cases:
        return ["field 'cases' must be a non-empty dict of algorithm -> case"]
    problems = []
    for name, case in cases.items():
        problems += _check(case, f"cases.{name}", _SOLVE_CASE)
        if isinstance(case.get("sb3"), dict) and "skipped" not in case["sb3"]:
            problems += _check(case, f"cases.{name}", _SOLVE_SB3)
    return problems


def record_problems(data: dict[str, Any]) -> list[str]:
    """What keeps the report from using `data`, a suite's record: each problem names the field
    (an empty list if none). A rate, time or ratio that is zero, negative or not finite is a
    problem: the report divides by them."""
    problems = _check(data, "", (("benchmark", _STR), ("provenance", _DICT)))
    benchmark = data.get("benchmark")
    if benchmark in _POINT:
        problems += _points(data, benchmark)
    if benchmark == "offpolicy":
        problems += _offpolicy(data)
    elif benchmark == "offpolicy_solve":
        problems += _offpolicy_solve(data)
    elif benchmark == "ppo":
        problems += _ppo(data)
    elif benchmark == "scaling":
        problems += _scaling(data)
    elif benchmark == "fusion_sizes":
        problems += _check(data, "", (("rows", _LIST), ("interpret_mode", _of_type(bool))))
        for i, row in enumerate(data.get("rows") or []):
            problems += _check(row, f"rows[{i}]", _SIZES_ROW)
    for i, target in enumerate(data.get("targets") or []):
        problems += _check(target, f"targets[{i}]", _TARGET)
    return problems
