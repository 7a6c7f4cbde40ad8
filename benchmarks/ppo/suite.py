"""The ppo suite: PPO's time to solve, Stable-Baselines3 beside it."""

from __future__ import annotations

from typing import Any

from benchmarks.harness import solved
from benchmarks.harness.suite import Plan, Suite
from benchmarks.ppo.section import plot_ppo, ppo_section
from benchmarks.report import schema as s

_RUN = (("seeds", s.INT), ("target", s.NUMBER), ("sps_whole_loop", s.positive))
_SB3 = (("seeds_reached", s.INT), ("mean_sps_whole_loop", s.positive), ("runs", s.LIST))
_COMPARISON = (
    ("speedup", s.optional(s.positive)),
    ("speedup_excluding_jaxsim_compile", s.optional(s.positive)),
)


def args(p: Plan) -> list[str]:
    sb3 = [] if "sb3" in p.baselines else ["--no-sb3"]
    if p.mode == "smoke":
        return ("--envs CartPole-v1 --seeds 1 --total-steps 1024 --warm-repeats 1 --no-sb3 "
                "--no-whole-process --no-gpu-sps").split()  # fmt: skip
    if p.mode == "quick":
        # A real time-to-solve on CartPole (3 seeds at once), SB3 with one seed beside it.
        return ["--envs", "CartPole-v1", "--sb3-seeds", "1", "--no-whole-process", *sb3]
    return sb3


def problems(data: dict[str, Any]) -> list[str]:
    found = s.check(data, "", (("jaxsim", s.DICT),))
    for env_id, run in (data.get("jaxsim") or {}).items():
        found += s.check(run, f"jaxsim.{env_id}", _RUN)
        found += solved.problems(run, f"jaxsim.{env_id}", "per_seed_steps_to_target")
    sb3 = data.get("sb3") or {}
    if sb3.get("runs"):
        found += s.check(sb3, "sb3", _SB3)
        for i, run in enumerate(sb3["runs"] if isinstance(sb3["runs"], list) else []):
            if isinstance(run, dict) and "solved" in run:
                found += solved.problems(
                    {"solved_per_seed": [run["solved"]], "steps": [run.get("steps_to_target")]},
                    f"sb3.runs[{i}]",
                    "steps",
                )
    return found + s.check(data.get("comparison"), "comparison", _COMPARISON, False)


SUITE = Suite(
    name="ppo",
    module="benchmarks.ppo.measure",
    title="PPO time-to-solve, Stable-Baselines3 beside it",
    heading="## Learning: time to solve",
    problems=problems,
    section=ppo_section,
    args=args,
    plot=plot_ppo,
)
