"""The scaling suite: rollout env-steps/s against the device count, the batch split over a mesh."""

from __future__ import annotations

from typing import Any

from benchmarks.harness.suite import Plan, Suite
from benchmarks.report import schema as s
from benchmarks.scaling.section import scaling_section

_ROW = (
    ("env", s.STR),
    ("backend", s.STR),
    ("devices", s.INT),
    ("mesh.env_steps_per_s", s.positive),
    ("unsharded.env_steps_per_s", s.positive),
    ("speedup", s.positive),
)


def args(p: Plan) -> list[str]:
    if p.mode == "smoke":
        return "--num-envs 256 --steps 16 --repeats 1 --min-time 0".split()
    return ["--quick"] if p.mode == "quick" else []


def problems(data: dict[str, Any]) -> list[str]:
    found = s.check(data, "", (("num_envs", s.INT), ("steps", s.INT), ("results", s.LIST)))
    for i, res in enumerate(data.get("results") or []):
        where = f"results[{i}]"
        found += s.check(res, where, (("any_done_loop.step_us", s.positive), ("rows", s.LIST)))
        for j, row in enumerate(res.get("rows") or [] if isinstance(res, dict) else []):
            found += s.check(row, f"{where}.rows[{j}]", _ROW)
    return found


SUITE = Suite(
    name="scaling",
    module="benchmarks.scaling.measure",
    title="rollout env-steps/s vs device count, the batch split over a mesh",
    heading="## Many devices: the batch split over a mesh",
    problems=problems,
    section=scaling_section,
    args=args,
)
