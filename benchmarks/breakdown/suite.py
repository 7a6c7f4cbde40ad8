"""The breakdown suite: where a PPO iteration's time goes, from the profiler."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness.formatting import format_rate, format_table
from benchmarks.harness.suite import Plan, Suite
from benchmarks.report import schema as s
from benchmarks.report.markdown import image, provenance_block
from benchmarks.report.records import Record

NO_OFFPOLICY_RECORD = "no offpolicy record (python -m benchmarks.offpolicy.measure writes one)"
BREAKDOWN_CATEGORIES = (
    "simulation",
    "policy inference",
    "learning",
    "other device (unscoped)",
    "host/Python",
    "idle device",
)


def breakdown_section(r: Record, base: Path, plot: Path | None = None) -> str:
    d = r.data
    cfg = d.get("config", {})
    parts = [f"### Where a PPO iteration's time goes: {r.device}", provenance_block(r, base)]
    parts.append(
        f"{cfg.get('env', 'CartPole-v1')}: {cfg.get('num_envs')} envs x {cfg.get('num_steps')} "
        "steps + one PPO update per iteration; shares of the iteration's wall-clock time."
    )
    parts.extend(category_table(d.get("results", [])))
    png = r.path.with_suffix(".png")
    if png.exists():
        parts.append(image(png, base, f"breakdown on {r.device}"))
    off = d.get("off_policy") or {}
    if not off.get("measured"):
        parts.append(f"Off-policy: not measured: {off.get('reason', NO_OFFPOLICY_RECORD)}")
    return "\n\n".join(parts)


def category_table(cases: list[dict[str, Any]]) -> list[str]:
    """Profiled cases (`benchmarks.breakdown.measure` records) -> [a table of their time per
    category, the notes and failures under it (if any)]."""
    rows, notes = [], []
    for c in cases:
        if c["status"] != "ok":
            rows.append([c["case"], c["status"], *[""] * (4 + len(BREAKDOWN_CATEGORIES))])
            notes.append(f"- {c['case']} {c['status']}: {c.get('reason') or c.get('error')}")
            continue
        shares = c.get("category_shares", {})
        rows.append(
            [
                c["case"],
                c.get("kind", ""),
                f"{1e3 * c['wall_s']:.2f}",
                format_rate(c["steps_per_s"]),
                f"{c.get('dispatches_per_iteration', 0):.0f}",
                *(f"{100 * shares.get(k, 0):.1f}%" for k in BREAKDOWN_CATEGORIES),
                f"{100 * (c.get('device_busy_fraction') or 0):.0f}%",
            ]
        )
        if c.get("notes"):
            notes.append(f"- {c['case']}: {c['notes']}")
    headers = [
        "case",
        "kind",
        "ms/iter",
        "env-steps/s",
        "dispatches",
        *BREAKDOWN_CATEGORIES,
        "device busy",
    ]
    return [format_table(headers, rows), *(["\n".join(notes)] if notes else [])]


def percent(share: float) -> str:
    """A share in [0, 1] as a percentage to 3 significant figures: 0.00259 -> "0.259%"."""
    return f"{100 * share:.3g}%"


def share(r: Record, case: str, category: str) -> float | None:
    for c in r.data.get("results", []):
        if c["case"] == case and c["status"] == "ok":
            return c.get("category_shares", {}).get(category)
    return None


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
