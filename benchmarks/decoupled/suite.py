"""The decoupled suite: time to solve CartPole through EnvPool, the decoupled train command
beside Stable-Baselines3 on the same environments. Minutes of whole processes and it needs
EnvPool and SB3, so the front door does not run it: `python -m benchmarks.decoupled.measure`
does."""

from __future__ import annotations

from typing import Any

from benchmarks.decoupled.section import decoupled_section
from benchmarks.harness import solved
from benchmarks.harness.suite import Suite
from benchmarks.report import schema as s

_SIDE = (
    ("seeds", s.INT),
    ("seeds_solved", s.INT),
    ("runs", s.LIST),
    ("median_wall_s_per_seed", s.optional(s.positive)),
)


def problems(data: dict[str, Any]) -> list[str]:
    found = s.check(data, "", (("env", s.STR), ("jaxsim", s.DICT), ("sb3", s.DICT)))
    sides = {
        f"jaxsim.{a}.{c}": arr.get(c) if isinstance(arr, dict) else None
        for a, arr in (data.get("jaxsim") or {}).items()
        for c in ("cold", "warm")
    }
    if isinstance(data.get("sb3"), dict) and "skipped" not in data["sb3"]:
        sides["sb3"] = data["sb3"]
        found += s.check(data, "", (("comparison", s.DICT),))
    for where, side in sides.items():
        found += s.check(side, where, _SIDE)
        found += solved.problems(side, where, "steps_to_target_per_seed")
    return found


SUITE = Suite(
    name="decoupled",
    module="benchmarks.decoupled.measure",
    title="Decoupled mode: time to solve CartPole through EnvPool beside Stable-Baselines3",
    heading="## Decoupled mode: host simulators (EnvPool) beside Stable-Baselines3",
    problems=problems,
    section=decoupled_section,
    no_record=(
        "Decoupled mode's time to solve beside Stable-Baselines3: not measured (no decoupled "
        "record: `python -m benchmarks.decoupled.measure` writes one)."
    ),
)
