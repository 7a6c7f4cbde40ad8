"""The profiler sections of the results report: where a PPO iteration's time goes (breakdown),
and the simulation share of on-policy vs off-policy updates (offpolicy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness.formatting import format_rate, format_ratio, format_table
from benchmarks.harness.report.markdown import image, provenance_block
from benchmarks.harness.report.records import OFF_POLICY_REASON, Record

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
    parts.extend(category_table(d.get("results", [])))
    png = r.path.with_suffix(".png")
    if png.exists():
        parts.append(image(png, base, f"breakdown on {r.device}"))
    off = d.get("off_policy") or {}
    if not off.get("measured"):
        parts.append(f"Off-policy: not measured: {off.get('reason', OFF_POLICY_REASON)}")
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


def offpolicy_section(r: Record, base: Path) -> str:
    """RL-Scope's comparison: the simulation share of a PPO update beside a DQN or SAC one."""
    d = r.data
    title = f"### On-policy vs off-policy, simulation share: {r.device}"
    parts = [title, provenance_block(r, base)]
    parts.append(
        "One update of each agent at its `agents.train` preset (one jit), profiled with "
        "`jaxsim.profile`; shares of the update's wall-clock time. The share depends on the "
        "gradient steps per environment step, which the presets fix (see each case's note)."
    )
    parts.extend(category_table(d.get("results", [])))
    rows = [
        [
            c["env"],
            f"{c['on_policy'].upper()} {percent(c['on_policy_simulation_share'])}",
            f"{c['off_policy'].upper()} {percent(c['off_policy_simulation_share'])}",
            f"**{format_ratio(c['ratio'])}**" if c["ratio"] else "– (off-policy share 0)",
            c.get("published", ""),
        ]
        for c in d["comparison"]
    ]
    headers = ["env", "on-policy: simulation", "off-policy: simulation", "ratio", "published"]
    parts.append(format_table(headers, rows))
    loops = d.get("gymnasium_loops")
    if isinstance(loops, dict):
        parts.extend(gymnasium_loops_parts(loops))
    elif loops:  # older records: a sentence
        parts.append(f"Loops stepping Gymnasium's CPU environments: {loops}.")
    png = r.path.with_suffix(".png")
    if png.exists():
        parts.append(image(png, base, f"on-policy vs off-policy on {r.device}"))
    return "\n\n".join(parts)


def gymnasium_loops_parts(loops: dict[str, Any]) -> list[str]:
    """An offpolicy record's `gymnasium_loops` (SB3's agents stepping Gymnasium's environments,
    `benchmarks.offpolicy_sb3.gymnasium_loops`) -> [what it measured, its cases, its ratios]."""
    if not loops.get("measured"):
        return [f"Loops stepping Gymnasium's CPU environments: not measured ({loops['reason']})."]
    parts = [
        f"Loops stepping Gymnasium's CPU environments, as RL-Scope measured: "
        f"{loops.get('library', 'Stable-Baselines3')}, each agent at rl-baselines3-zoo's "
        f"settings. Simulation: {loops.get('simulation', 'time in the VecEnv')}."
    ]
    rows = [
        [
            c["case"],
            c.get("kind", ""),
            f"{c.get('gradient_steps_per_env_step', 0):.3g}",
            f"{c['wall_s']:.2f}",
            format_rate(c["steps_per_s"]),
            percent(c["category_shares"]["simulation"]),
            percent(c.get("env_step_share", 0.0)),
        ]
        for c in loops.get("results", [])
    ]
    headers = ["case", "kind", "grad steps / env step", "learn() s", "env-steps/s",
               "simulation (VecEnv)", "env.step alone"]  # fmt: skip
    parts.append(format_table(headers, rows))
    ratios = [
        [
            c["env"],
            f"{c['on_policy'].upper()} {percent(c['on_policy_simulation_share'])}",
            f"{c['off_policy'].upper()} {percent(c['off_policy_simulation_share'])}",
            f"**{format_ratio(c['ratio'])}**" if c["ratio"] else "– (off-policy share 0)",
            format_ratio(c.get("env_step_ratio")),
        ]
        for c in loops["comparison"]
    ]
    headers = ["env", "on-policy: simulation", "off-policy: simulation", "ratio",
               "ratio, env.step alone"]  # fmt: skip
    parts.append(format_table(headers, ratios))
    return parts


def percent(share: float) -> str:
    """A share in [0, 1] as a percentage to 3 significant figures: 0.00259 -> "0.259%"."""
    return f"{100 * share:.3g}%"


def share(r: Record, case: str, category: str) -> float | None:
    for c in r.data.get("results", []):
        if c["case"] == case and c["status"] == "ok":
            return c.get("category_shares", {}).get(category)
    return None
