"""The breakdown suite: where a PPO iteration's time goes, from the profiler."""

from __future__ import annotations

from typing import Any

from benchmarks.breakdown.section import breakdown_section
from benchmarks.harness.suite import Plan, Suite
from benchmarks.report import schema as s


def args(p: Plan) -> list[str]:
    # On a CPU the fused kernel runs in Pallas interpret mode (not a speed); the main job's
    # quick run leaves it out there, full runs keep it.
    cases = ["ppo_scan"] if p.mode == "quick" and not p.on_gpu else ["ppo_scan", "ppo_fused"]
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
    module="benchmarks.breakdown.measure",
    title="profiler breakdown of a PPO iteration (simulation, policy, learning, host)",
    heading="## Profiler breakdown",
    problems=problems,
    section=breakdown_section,
    args=args,
)
