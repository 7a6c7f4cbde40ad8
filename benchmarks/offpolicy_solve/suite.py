"""The offpolicy_solve suite: DQN's and SAC's time to solve beside Stable-Baselines3's. Hours on
a CPU, so the front door does not run it: `python -m benchmarks.offpolicy_solve.measure` does."""

from __future__ import annotations

from typing import Any

from benchmarks.harness import solved
from benchmarks.harness.suite import Suite
from benchmarks.offpolicy_solve.section import solve_section
from benchmarks.report import schema as s

_CASE = (
    ("env", s.STR),
    ("target", s.NUMBER),
    ("jaxsim.seeds", s.INT),
    ("jaxsim.seeds_reached", s.INT),
    ("jaxsim.train_wall_s_per_seed", s.positive),
    ("jaxsim.compile_s_per_seed", s.non_negative),
    ("sb3", s.DICT),
    ("comparison", s.DICT),
    ("comparison.speedup", s.optional(s.positive)),
)
_SB3 = (
    ("sb3.seeds", s.INT),
    ("sb3.seeds_reached", s.INT),
    ("sb3.train_wall_s_per_seed", s.positive),
    ("sb3.runs", s.LIST),
)


def problems(data: dict[str, Any]) -> list[str]:
    cases = data.get("cases")
    if not isinstance(cases, dict) or not cases:
        return ["field 'cases' must be a non-empty dict of algorithm -> case"]
    found = []
    for name, case in cases.items():
        found += s.check(case, f"cases.{name}", _CASE)
        jaxsim = case.get("jaxsim") if isinstance(case, dict) else None
        found += solved.problems(jaxsim, f"cases.{name}.jaxsim", "per_seed_steps_to_return")
        if isinstance(case.get("sb3"), dict) and "skipped" not in case["sb3"]:
            found += s.check(case, f"cases.{name}", _SB3)
    return found


SUITE = Suite(
    name="offpolicy_solve",
    module="benchmarks.offpolicy_solve.measure",
    title="DQN and SAC time-to-solve beside Stable-Baselines3",
    heading="## Off-policy time to solve: DQN and SAC beside Stable-Baselines3",
    problems=problems,
    section=solve_section,
    no_record=(
        "Off-policy (DQN, SAC) time-to-solve beside Stable-Baselines3: not measured (no "
        "offpolicy_solve record: `python -m benchmarks.offpolicy_solve.measure` writes one; the "
        "learning results of `agents.train dqn|sac` are in agents/README.md)."
    ),
)
