"""The profiler-breakdown section of the results report: where a PPO iteration's time goes."""

from __future__ import annotations

from pathlib import Path

from benchmarks.formatting import format_rate, format_table
from benchmarks.results_report.markdown import image, provenance_block
from benchmarks.results_report.records import OFF_POLICY_REASON, Record

BREAKDOWN_CATEGORIES = (
    "simulation",
    "policy inference",
    "learning",
    "other device (unscoped)",
    "host/Python",
    "idle device",
)


def breakdown_section(r: Record, base: Path) -> str:
    d = r.data
    cfg = d.get("config", {})
    parts = [f"### Where a PPO iteration's time goes: {r.device}", provenance_block(r, base)]
    parts.append(
        f"{cfg.get('env', 'CartPole-v1')}: {cfg.get('num_envs')} envs x {cfg.get('num_steps')} "
        "steps + one PPO update per iteration; shares of the iteration's wall-clock time."
    )
    rows, notes = [], []
    for c in d.get("results", []):
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
    parts.append(format_table(headers, rows))
    if notes:
        parts.append("\n".join(notes))
    png = r.path.with_suffix(".png")
    if png.exists():
        parts.append(image(png, base, f"breakdown on {r.device}"))
    off = d.get("off_policy") or {}
    if not off.get("measured"):
        parts.append(f"Off-policy: not measured: {off.get('reason', OFF_POLICY_REASON)}")
    return "\n\n".join(parts)


def share(r: Record, case: str, category: str) -> float | None:
    for c in r.data.get("results", []):
        if c["case"] == case and c["status"] == "ok":
            return c.get("category_shares", {}).get(category)
    return None
