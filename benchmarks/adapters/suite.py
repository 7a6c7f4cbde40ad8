"""The adapters suite: brax and gymnax through jaxsim.rollout beside their own loops."""

from __future__ import annotations

from typing import Any

from benchmarks.adapters.section import adapters_section
from benchmarks.harness.suite import Plan, Suite
from benchmarks.report import schema as s


def args(p: Plan) -> list[str]:
    # Each adapter is measured beside its own library, so a library left out is a family left
    # out; Gymnasium's MuJoCo Ant-v5 comes with the Gymnasium baselines.
    # Quick runs leave gymnax's pair (Breakout through jaxsim beside gymnax's own loop) to the
    # minatar suite, which measures the same two loops.
    families = [
        f for f in ("brax", "gymnax") if f in p.baselines and (f, p.mode) != ("gymnax", "quick")
    ]
    families += ["gymnasium"] if "gymnasium_sync" in p.baselines else []
    selected = ["--families", ",".join(families) or "none"]
    if p.mode == "smoke":
        return [*selected, *("--brax-env inverted_pendulum --num-envs 2 --brax-steps-per-call 8 "
                "--gymnax-steps-per-call 8 --min-steps 4 --repeats 1 --gymnasium-steps 8 "
                "--gymnasium-vector-envs 2").split()]  # fmt: skip
    # Quick: brax's inverted_pendulum at one batch size. Compiling ant is most of its cost: at
    # N=256 on 2 cores, load ~3, 108 s (compiles 49 s + 18 s) against 40 s for inverted_pendulum.
    # Full runs measure ant at N = 16, 256, 2048.
    quick = ["--quick", "--brax-env", "inverted_pendulum", "--num-envs", "256"]
    return [*selected, *(quick if p.mode == "quick" else [])]


def problems(data: dict[str, Any]) -> list[str]:
    point = (("env_id", s.STR), ("impl", s.STR), ("num_envs", s.INT), ("status", s.STR))
    return s.points(data, point, s.TIMED, (("reason", s.STR),))


SUITE = Suite(
    name="adapters",
    module="benchmarks.adapters.measure",
    title="brax and gymnax through jaxsim.rollout beside their own loops, Gymnasium Ant-v5",
    heading="## Adapters: brax and gymnax through jaxsim",
    problems=problems,
    section=adapters_section,
    args=args,
)
