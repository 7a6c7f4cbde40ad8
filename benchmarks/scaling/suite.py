"""The scaling suite: rollout env-steps/s against the device count, the batch split over a mesh."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness.formatting import format_rate, format_ratio, format_table
from benchmarks.harness.suite import Plan, Suite
from benchmarks.report import schema as s
from benchmarks.report.markdown import provenance_block
from benchmarks.report.records import Record


def scaling_section(r: Record, base: Path, plot: Path | None = None) -> str:
    d = r.data
    parts = [f"### Device scaling: {r.device}", provenance_block(r, base)]
    parts.append(
        f"env-steps/s of `jaxsim.rollout(..., mesh=)` (random policy, rewards only, "
        f"{d['num_envs']} environments x {d['steps']} steps) with the batch split over a mesh "
        "of D devices, one process per D (on a CPU, forced host devices); *unsharded* is "
        "mesh=None in the same process. *Speedup* is over the better of the one-device mesh "
        "and unsharded rates. *CPU/wall* is the mesh rollout's CPU seconds per wall second "
        "(median of repeats): XLA already spreads one device's work over more than one core, "
        "which bounds what more devices on the same cores can add."
    )
    rows = []
    for res in d["results"]:
        for row in res["rows"]:
            cpu = row["mesh"].get("cpu_over_wall") or []
            rows.append(
                [
                    row["env"],
                    row["backend"],
                    row["devices"],
                    format_rate(row["mesh"]["env_steps_per_s"]),
                    format_rate(row["unsharded"]["env_steps_per_s"]),
                    format_ratio(row.get("speedup")),
                    f"{sorted(cpu)[len(cpu) // 2]:.2f}" if cpu else "–",
                    f"{res['any_done_loop']['step_us']:.1f}",
                ]
            )
    headers = ["env", "backend", "D", "mesh", "unsharded", "speedup", "CPU/wall", "any-done us"]
    parts.append(format_table(headers, rows))
    for t in d.get("targets") or []:
        parts.append(f"Target {t['name']}: {format_ratio(t['value'])} ({t['status']}).")
    return "\n\n".join(parts)


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
