"""The offpolicy suite: the simulation share of a PPO update beside a DQN and a SAC one.

Its section of the results report: the simulation share of on-policy vs off-policy
updates, in one-jit loops and in SB3's loops stepping Gymnasium."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.breakdown.suite import NO_OFFPOLICY_RECORD, category_table, percent
from benchmarks.harness.formatting import format_rate, format_ratio, format_table
from benchmarks.harness.suite import Plan, Suite
from benchmarks.report import schema as s
from benchmarks.report.markdown import image, provenance_block
from benchmarks.report.records import Record


def offpolicy_section(r: Record, base: Path, plot: Path | None = None) -> str:
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
    `benchmarks.baselines.offpolicy_sb3.gymnasium_loops`) -> [what it measured, its cases, its
    ratios]."""
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


def off_policy_reason(entries: Sequence[dict[str, Any]]) -> str:
    """Why the off-policy comparison is missing: the reason the latest run that reached the
    offpolicy suite skipped it (an older skip does not outlive a later run), else the default."""
    latest = next((e for e in reversed(entries) if e.get("suite") == "offpolicy"), {})
    if latest.get("status") == "skipped" and latest.get("reason"):
        return latest["reason"]
    return NO_OFFPOLICY_RECORD


_COMPARISON = (
    ("env", s.STR),
    ("on_policy", s.STR),
    ("off_policy", s.STR),
    ("on_policy_simulation_share", s.non_negative),
    ("off_policy_simulation_share", s.non_negative),
    ("ratio", s.optional(s.positive)),
)


def args(p: Plan) -> list[str]:
    if p.mode == "smoke":
        return "--envs CartPole-v1 --iterations 1 --repeats 1 --min-time 0 --no-gym-loops".split()
    # Quick: the CartPole pair (PPO beside DQN); full runs add Pendulum's (PPO beside SAC).
    return ["--quick", "--envs", "CartPole-v1"] if p.mode == "quick" else []


def problems(data: dict[str, Any]) -> list[str]:
    point = (("algorithm", s.STR), ("env", s.STR), ("case", s.STR), ("status", s.STR))
    found = s.points(data, point, s.PROFILED)
    rows = data.get("comparison")
    if not isinstance(rows, list):
        return found + s.check(data, "", (("comparison", s.LIST),))
    for i, row in enumerate(rows):
        found += s.check(row, f"comparison[{i}]", _COMPARISON)
    # Older records say in a sentence what they did not measure; newer ones carry a dict.
    loops = data.get("gymnasium_loops")
    if isinstance(loops, dict):
        found += s.check(loops, "gymnasium_loops", (("measured", s.BOOL),))
        if loops.get("measured") is True:
            found += s.check(loops, "gymnasium_loops", (("comparison", s.LIST),))
            for i, row in enumerate(loops.get("comparison") or []):
                found += s.check(row, f"gymnasium_loops.comparison[{i}]", _COMPARISON)
        elif loops.get("measured") is False:
            found += s.check(loops, "gymnasium_loops", (("reason", s.STR),))
    return found


SUITE = Suite(
    name="offpolicy",
    module="benchmarks.offpolicy.measure",
    title="simulation share of an update: PPO beside DQN (CartPole) and SAC (Pendulum)",
    heading="## On-policy vs off-policy",
    problems=problems,
    section=offpolicy_section,
    args=args,
)
