"""The breakdown suite: where a PPO iteration's time goes, from the profiler."""

from __future__ import annotations

from typing import Any

from benchmarks.breakdown.report import breakdown_section
from benchmarks.harness.report import schema as s
from benchmarks.harness.suite import Plan, Suite


def args(p: Plan) -> list[str]:
    cases = ["ppo_scan", "ppo_fused"]
    if "gymnasium_sync" in p.baselines:
        cases.append("gym_sync")
    if p.mode == "smoke":
        return ("--cases ppo_scan --num-envs 2 --num-steps 16 --update-epochs 1 "
                "--num-minibatches 1 --iterations 1 --repeats 1 --min-time 0").split()  # fmt: skip
    return ["--cases", ",".join(cases), *(["--quick"] if p.mode == "quick" else [])]


def problems(data: dict[str, Any]) -> list[str]:
    return s.points(data, (("case", s.STR), ("status", s.STR)), s.PROFILED)


SUITE = Suite(
    name="breakdown",
    module="benchmarks.breakdown",
    title="profiler breakdown of a PPO iteration (simulation, policy, learning, host)",
    heading="## Profiler breakdown",
    problems=problems,
    section=breakdown_section,
    args=args,
)
