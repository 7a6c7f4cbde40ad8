"""The sizes suite: scan against fused on Swarm-v0 as its state grows, beside a traffic model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.fusion_sizes.section import plot_sizes, sizes_section
from benchmarks.harness.suite import Plan, Suite
from benchmarks.report import schema as s

_ROW = (
    ("num_particles", s.INT),
    ("outputs", s.STR),
    ("model.state_bytes_per_env", s.positive),
    ("model.scan_bytes_per_step", s.positive),
    ("model.fused_bytes_per_step", s.DICT),
    ("model.predicted_ratio", s.DICT),
    ("measured_ratio", s.optional(s.positive)),
    ("check", s.DICT),
    ("points", s.LIST),
)


def args(p: Plan) -> list[str]:
    if p.mode == "smoke":
        return "--sizes 1,16 --outputs rewards --num-envs 8 --steps 4 --k 2 --min-time 0".split()
    if p.on_gpu:
        return [] if p.mode == "full" else "--sizes 1024,64,1 --budget-s 120".split()
    # On a CPU the kernel runs in Pallas interpret mode: a correctness cost, kept small.
    return "--sizes 1,256 --outputs rewards".split() if p.mode == "quick" else []


def problems(data: dict[str, Any]) -> list[str]:
    found = s.check(data, "", (("rows", s.LIST), ("interpret_mode", s.BOOL)))
    for i, row in enumerate(data.get("rows") or []):
        found += s.check(row, f"rows[{i}]", _ROW)
    return found


def _plot(r, path: Path) -> Path:
    return plot_sizes(r.data, path)


SUITE = Suite(
    name="sizes",
    module="benchmarks.fusion_sizes.measure",
    title="scan vs fused on Swarm-v0 as its state grows, beside a traffic model",
    heading="## Fusion vs simulator size",
    problems=problems,
    section=sizes_section,
    args=args,
    plot=_plot,
)
