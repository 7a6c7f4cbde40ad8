"""The fusion suite: scan against fused rollouts over K, the steps fused per kernel launch."""

from __future__ import annotations

from typing import Any

from benchmarks.fusion.section import fusion_section, plot_fusion
from benchmarks.harness.suite import Plan, Suite
from benchmarks.report import schema as s


def args(p: Plan) -> list[str]:
    if p.mode == "smoke":
        return (
            "--policies random --outputs stats --num-envs 256 --k 4 --steps 8 --min-time 0".split()
        )
    if p.on_gpu:
        return ["--quick"] if p.mode == "quick" else []
    # On a CPU the kernel runs in Pallas interpret mode: a correctness cost, kept small.
    if p.mode == "quick":  # the random policy's pair; full runs add the MLP policy's
        return "--quick --policies random --outputs rewards --k 1,16 --min-time 0.1".split()
    return "--k 1,4,16,64".split()


def problems(data: dict[str, Any]) -> list[str]:
    point = (
        ("env_id", s.STR),
        ("policy", s.STR),
        ("outputs", s.STR),
        ("num_envs", s.INT),
        ("backend", s.STR),
        ("k", s.optional(s.INT)),
        ("status", s.STR),
    )
    ok = (("steps_per_s.median", s.positive), ("compile_s", s.optional(s.non_negative)))
    return s.points(data, point, ok)


SUITE = Suite(
    name="fusion",
    module="benchmarks.fusion.measure",
    title="scan vs fused rollouts, K sweep (Pallas interpret mode on a CPU)",
    heading="## Scan vs fused (K sweep)",
    problems=problems,
    section=fusion_section,
    args=args,
    plot=plot_fusion,
)
