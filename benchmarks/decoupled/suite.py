"""The decoupled suite: time to solve CartPole through EnvPool, the decoupled train command
beside Stable-Baselines3 on the same environments. Minutes of whole processes and it needs
EnvPool and SB3, so the front door does not run it: `python -m benchmarks.decoupled.measure`
does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness import solved
from benchmarks.harness.formatting import format_ratio, format_seconds, format_table, format_verdict
from benchmarks.harness.solved import rejected_note
from benchmarks.harness.suite import Suite
from benchmarks.report import schema as s
from benchmarks.report.markdown import current_command, provenance_block
from benchmarks.report.records import Record

HOW = {"cold": "cold, a process a seed", "warm": "warm, a process a seed",
       "warm_seeds": "warm, --seeds N in one process"}  # fmt: skip


def _row(name: str, side: dict[str, Any]) -> list[str]:
    steps = [s for s in side["steps_to_target_per_seed"] if s]
    return [
        name, f"{side['seeds_solved']}/{side['seeds']}",
        ", ".join(f"{s:,}" for s in steps) or "–",
        format_seconds(side["median_wall_s_per_seed"]),
        ", ".join(format_seconds(x["wall_s"]) for x in side["runs"]),
        ", ".join(f"{x['load_1min_before']:.0f}-{x['load_1min_after']:.0f}" for x in side["runs"]),
    ]  # fmt: skip


def decoupled_section(r: Record, base: Path, plot: Path | None = None) -> str:
    d = r.data
    parts = [f"### Decoupled mode: time to solve {d['env']}, {r.device}", provenance_block(r, base)]
    parts.append(
        "Whole processes from start to exit (imports, compiles, stop checks in): "
        f"`{d['jaxsim_command']}` with each arrangement's flags (cold: a fresh compilation "
        "cache; warm: one a cold run filled; `--seeds N`: the seeds one after another in one "
        f"process, its time / N) and `{current_command(d['sb3_command'])}` (rl-zoo's CartPole "
        f"PPO on EnvPool's CartPole), one process a seed. Solved: {d['solved_rule']}."
    )
    rows, sides = [], []
    for a, arr in d["jaxsim"].items():
        flags = " ".join(arr["flags"]) or "defaults"
        for cache in ("cold", "warm"):
            sides.append((f"jaxsim {a} ({flags}) {cache}", arr[cache]))
            rows.append(_row(sides[-1][0], arr[cache]))
        m = arr.get("warm_seeds")
        if m:
            rows.append([
                f"jaxsim {a} warm, --seeds {m['seeds']}",
                f"{sum(m['solved_per_seed'])}/{m['seeds']}",
                ", ".join(f"{s:,}" for s in m["steps_to_target_per_seed"] if s) or "–",
                format_seconds(m["per_seed_wall_s"]) + " (its wall / N)",
                format_seconds(m["wall_s"]),
                f"{m['load_1min_before']:.0f}-{m['load_1min_after']:.0f}",
            ])  # fmt: skip
    if "runs" in d["sb3"]:
        sides.append(("SB3 on EnvPool", d["sb3"]))
        rows.append(_row("SB3 on EnvPool", d["sb3"]))
    headers = ["side", "solved", "steps to solved", "median s / seed", "each process s", "load"]
    parts.append(format_table(headers, rows))
    for a, cmp in (d.get("comparison") or {}).items():
        found = [
            f"{HOW[how]} **{format_ratio(cmp[f'speedup_{how}'])}** "
            f"({format_ratio(cmp[f'speedup_{how}_excluding_checks'])} without either side's "
            f"checks; {format_verdict(cmp[f'target_met_{how}'])})"
            for how in HOW
            if f"speedup_{how}" in cmp
        ]
        parts.append(f"SB3 ÷ jaxsim per seed, {a} (target {cmp['target']}): " + "; ".join(found))
    if not d.get("comparison"):
        parts.append(f"SB3 not measured ({d['sb3'].get('skipped')}).")
    for name, side in sides:
        for x in side["runs"]:
            note = rejected_note(f"{name} seed {x['seed']}", x.get("rejected_checks") or [])
            if note:
                parts.append(note)
    return "\n\n".join(parts)


_SIDE = (
    ("seeds", s.INT),
    ("seeds_solved", s.INT),
    ("runs", s.LIST),
    ("median_wall_s_per_seed", s.optional(s.positive)),
)


def problems(data: dict[str, Any]) -> list[str]:
    found = s.check(data, "", (("env", s.STR), ("jaxsim", s.DICT), ("sb3", s.DICT)))
    sides = {
        f"jaxsim.{a}.{c}": arr.get(c) if isinstance(arr, dict) else None
        for a, arr in (data.get("jaxsim") or {}).items()
        for c in ("cold", "warm")
    }
    if isinstance(data.get("sb3"), dict) and "skipped" not in data["sb3"]:
        sides["sb3"] = data["sb3"]
        found += s.check(data, "", (("comparison", s.DICT),))
    for where, side in sides.items():
        found += s.check(side, where, _SIDE)
        found += solved.problems(side, where, "steps_to_target_per_seed")
    return found


SUITE = Suite(
    name="decoupled",
    module="benchmarks.decoupled.measure",
    title="Decoupled mode: time to solve CartPole through EnvPool beside Stable-Baselines3",
    heading="## Decoupled mode: host simulators (EnvPool) beside Stable-Baselines3",
    problems=problems,
    section=decoupled_section,
    no_record=(
        "Decoupled mode's time to solve beside Stable-Baselines3: not measured (no decoupled "
        "record: `python -m benchmarks.decoupled.measure` writes one)."
    ),
)
