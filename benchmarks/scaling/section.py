"""The scaling section of the results report: env-steps/s as the batch is split over devices."""

from __future__ import annotations

from pathlib import Path

from benchmarks.harness.formatting import format_rate, format_ratio, format_table
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
