"""The adapters suite: brax and gymnax through jaxsim.rollout beside their own loops."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness.formatting import format_rate, format_ratio, format_table
from benchmarks.harness.suite import Plan, Suite
from benchmarks.report import schema as s
from benchmarks.report.markdown import provenance_block
from benchmarks.report.records import Record


def adapters_section(r: Record, base: Path, plot: Path | None = None) -> str:
    d = r.data
    title = f"### Adapters beside their libraries' own loops: {r.device}"
    parts = [title, provenance_block(r, base)]
    parts.append(
        'env-steps/s of `jaxsim.rollout` through `jaxsim.make("brax/...")` and '
        '`jaxsim.make("gymnax/...")` and of each library\'s own jitted loop with its own '
        "auto-reset, at the same N, steps per call and policy, timed in alternation; the "
        "target is jaxsim / own >= 0.95 (at most 5% overhead), on the medians. *Paired*: the "
        "median of each round's ratio; *CPU time*: the ratio of this process's CPU seconds per "
        "call, which load from other processes moves least. *Steps with a reset*: the share of "
        "steps on which some environment of the batch ended its episode."
    )
    points = d.get("results", [])
    own = {(p["env_id"], p["num_envs"]): p for p in points if p["impl"] not in ("jaxsim", "-")}
    rows, notes = [], []
    for p in points:
        if p["status"] != "ok":
            notes.append(f"- {p['env_id']} N={p['num_envs']}: {p['status']}: {p.get('reason')}")
            continue
        if p["impl"] != "jaxsim":
            continue
        o = own.get((p["env_id"], p["num_envs"]))
        over = p.get("over_own") or {}
        rows.append(
            [
                p["env_id"],
                p["num_envs"],
                p["steps"],
                format_rate(p["steps_per_s"]["median"]),
                format_rate(o["steps_per_s"]["median"]) if o else "–",
                format_ratio(over.get("ratio_of_medians")),
                format_ratio(over.get("paired_median")),
                format_ratio(over.get("cpu_time_ratio")),
                f"{100 * p['checks'].get('reset_step_share', 0):.0f}%",
            ]
        )
    headers = [
        "environment",
        "N",
        "steps/call",
        "jaxsim",
        "own loop",
        "jaxsim / own",
        "paired",
        "CPU time",
        "steps with a reset",
    ]
    parts.append(format_table(headers, rows))
    cpu = [p for p in points if p["status"] == "ok" and p["family"] == "gymnasium"]
    if cpu:
        parts.append(
            "Gymnasium (MuJoCo, on the CPU, from Python): "
            + "; ".join(
                f"{p['env_id']} {p['impl']} N={p['num_envs']}: "
                f"{format_rate(p['steps_per_s']['median'])} env-steps/s"
                for p in cpu
            )
        )
    failed = [t for t in d.get("targets", []) if t.get("status") == "fail"]
    if failed:
        parts.append(
            "Missed: "
            + "; ".join(
                f"{t['env_id']} N={t['num_envs']} ({format_ratio(t['value'])})" for t in failed
            )
        )
    if notes:
        parts.append("\n".join(notes))
    return "\n\n".join(parts)


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
