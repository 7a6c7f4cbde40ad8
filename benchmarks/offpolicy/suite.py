"""The offpolicy suite: the simulation share of a PPO update beside a DQN and a SAC one."""

from __future__ import annotations

from typing import Any

from benchmarks.harness.suite import Plan, Suite
from benchmarks.offpolicy.section import offpolicy_section
from benchmarks.report import schema as s

_COMPARISON = (
    ("env", s.STR),
    ("on_policy", s.STR),
    ("off_policy", s.STR),
    ("on_policy_simulation_share", s.non_negative),
    ("off_policy_simulation_share", s.non_negative),
    ("ratio", s.optional(s.positive)),
)


def args(p: Plan) -> list[str]:
    if p.mode == "smoke":
        return "--envs CartPole-v1 --iterations 1 --repeats 1 --min-time 0 --no-gym-loops".split()
    # Quick: the CartPole pair (PPO beside DQN); full runs add Pendulum's (PPO beside SAC).
    return ["--quick", "--envs", "CartPole-v1"] if p.mode == "quick" else []


def problems(data: dict[str, Any]) -> list[str]:
    point = (("algorithm", s.STR), ("env", s.STR), ("case", s.STR), ("status", s.STR))
    found = s.points(data, point, s.PROFILED)
    rows = data.get("comparison")
    if not isinstance(rows, list):
        return found + s.check(data, "", (("comparison", s.LIST),))
    for i, row in enumerate(rows):
        found += s.check(row, f"comparison[{i}]", _COMPARISON)
    # Older records say in a sentence what they did not measure; newer ones carry a dict.
    loops = data.get("gymnasium_loops")
    if isinstance(loops, dict):
        found += s.check(loops, "gymnasium_loops", (("measured", s.BOOL),))
        if loops.get("measured") is True:
            found += s.check(loops, "gymnasium_loops", (("comparison", s.LIST),))
            for i, row in enumerate(loops.get("comparison") or []):
                found += s.check(row, f"gymnasium_loops.comparison[{i}]", _COMPARISON)
        elif loops.get("measured") is False:
            found += s.check(loops, "gymnasium_loops", (("reason", s.STR),))
    return found


SUITE = Suite(
    name="offpolicy",
    module="benchmarks.offpolicy.measure",
    title="simulation share of an update: PPO beside DQN (CartPole) and SAC (Pendulum)",
    heading="## On-policy vs off-policy",
    problems=problems,
    section=offpolicy_section,
    args=args,
)
