"""The offpolicy_solve suite: DQN's and SAC's time to solve beside Stable-Baselines3's. Hours on
a CPU, so the front door does not run it: `python -m benchmarks.offpolicy_solve.measure` does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness import solved
from benchmarks.harness.formatting import (
    format_mean_std,
    format_ratio,
    format_seconds,
    format_table,
    format_verdict,
)
from benchmarks.harness.solved import rejected_note, rule_sentence, solved_cell, under_rule
from benchmarks.harness.suite import Suite
from benchmarks.report import schema as s
from benchmarks.report.markdown import provenance_block
from benchmarks.report.records import Record

# A speedup that is a lower bound (SB3 short of the return) under the target decides nothing.
UNDECIDED = "undecided, SB3 short of the return"


def solve_section(r: Record, base: Path, plot: Path | None = None) -> str:
    d = r.data
    parts = [f"### Off-policy time-to-solve: {r.device}", provenance_block(r, base)]
    if d.get("quick"):
        parts.append("**`--quick` record: one seed a side and 5-episode evaluations.**")
    judged = under_rule([case["jaxsim"] for case in d["cases"].values()])
    parts.append(
        "Training wall-clock per seed until a seed is solved, evaluations excluded: a stop "
        "check is a deterministic evaluation (mean of the episodes shown, per seed, at the same "
        "cadence in env steps on both sides). jaxsim: the `agents.train` "
        "preset, every seed at once, its run divided by the seeds, compile included (and shown "
        "apart). Stable-Baselines3: rl-baselines3-zoo's settings and budget on Gymnasium's "
        f"environment, one seed at a time (torch threads: {d.get('sb3_torch_threads', '–')}). "
        + rule_sentence(judged)
    )
    rows = []
    for algorithm, case in d["cases"].items():
        jx, sb3 = case["jaxsim"], case["sb3"]
        name = f"{algorithm.upper()} {case['env']} (to {case['target']:g})"
        rows.append(
            [
                f"jaxsim {name}",
                solved_cell(jx, "per_seed_steps_to_return"),
                format_mean_std(jx.get("per_seed_steps_to_return") or [], "{:,.0f}"),
                format_seconds(jx["train_wall_s_per_seed"]),
                format_seconds(jx["compile_s_per_seed"]),
            ]
        )
        if sb3.get("skipped"):
            rows.append([f"SB3 {name}", f"not measured ({sb3['skipped']})", "", "", ""])
            continue
        runs = sb3.get("runs", [])
        rows.append(
            [
                f"SB3 {name}",
                f"{sb3['seeds_reached']}/{sb3['seeds']}"
                + ("" if under_rule(runs, "confirm_episodes") else " (stop check only)"),
                format_mean_std([x["steps_to_return"] for x in runs], "{:,.0f}"),
                ("≥ " if sb3.get("lower_bound") else "")
                + format_seconds(sb3["train_wall_s_per_seed"]),
                "–",
            ]
        )
    headers = ["run", "seeds solved", "env steps to solved", "train s / seed", "compile s / seed"]
    parts.append(format_table(headers, rows))
    parts.extend(_finding(algorithm, case) for algorithm, case in d["cases"].items())
    for algorithm, case in d["cases"].items():
        name = f"{algorithm.upper()} {case['env']}"
        notes = [rejected_note(f"jaxsim {name}", case["jaxsim"].get("rejected_checks") or [])]
        notes += [
            rejected_note(f"SB3 {name} seed {x['seed']}", x.get("rejected_checks") or [])
            for x in case["sb3"].get("runs", [])
        ]
        parts.extend(n for n in notes if n)
    return "\n\n".join(parts)


def _finding(algorithm: str, case: dict[str, Any]) -> str:
    cmp, sb3 = case["comparison"], case["sb3"]
    name = f"{algorithm.upper()} {case['env']} to {case['target']:g}"
    if cmp.get("skipped") or not cmp.get("speedup"):
        return f"{name}: speedup not measured ({cmp.get('skipped') or cmp.get('reason')})."
    text = (
        f"{name}: SB3 ÷ jaxsim per seed = "
        + ("at least " if cmp.get("speedup_is_lower_bound") else "")
        + f"**{format_ratio(cmp['speedup'])}** with jaxsim's compile, "
        f"{format_ratio(cmp.get('speedup_excluding_jaxsim_compile'))} without it "
        f"(target {cmp['target']}: {format_verdict(cmp['target_met'], UNDECIDED)})"
    )
    if cmp.get("system_speed_ratio") and cmp.get("steps_ratio"):
        text += (
            f"; its factors: system speed (training env-steps/s, compile excluded) jaxsim ÷ SB3 "
            f"= {format_ratio(cmp['system_speed_ratio'])}, env steps to solve SB3 ÷ jaxsim = "
            f"{format_ratio(cmp['steps_ratio'])}{_preset_note(cmp.get('preset_vs_rl_zoo'))}"
        )
    if sb3.get("lower_bound"):
        text += (
            f"; SB3 did not reach the return in {sb3['seeds'] - sb3['seeds_reached']} of its "
            f"seeds within rl-zoo's budget (best evaluation {sb3['best_return']:.1f}): its whole "
            "budget's time stands for those"
        )
    return text + "."


def _preset_note(differs: dict[str, list] | None) -> str:
    if differs is None:
        return ""
    if not differs:
        return " (jaxsim's preset has rl-zoo's numbers)"
    shown = ", ".join(f"{k} {v[1]} for {v[0]}" for k, v in differs.items())
    return f" (jaxsim's preset departs from rl-zoo's: {shown})"


def solve_summary(r: Record) -> str:
    """The speedups of a record: "DQN CartPole-v1 **4.68x**; SAC Pendulum-v1 ≥ **2x**"."""
    found = []
    for algorithm, case in r.data["cases"].items():
        cmp = case["comparison"]
        ratio = (
            ("≥ " if cmp.get("speedup_is_lower_bound") else "")
            + f"**{format_ratio(cmp['speedup'])}**"
            if cmp.get("speedup")
            else f"not measured ({cmp.get('skipped') or cmp.get('reason')})"
        )
        found.append(f"{algorithm.upper()} {case['env']} {ratio}")
    return "; ".join(found)


_CASE = (
    ("env", s.STR),
    ("target", s.NUMBER),
    ("jaxsim.seeds", s.INT),
    ("jaxsim.seeds_reached", s.INT),
    ("jaxsim.train_wall_s_per_seed", s.positive),
    ("jaxsim.compile_s_per_seed", s.non_negative),
    ("sb3", s.DICT),
    ("comparison", s.DICT),
    ("comparison.speedup", s.optional(s.positive)),
)
_SB3 = (
    ("sb3.seeds", s.INT),
    ("sb3.seeds_reached", s.INT),
    ("sb3.train_wall_s_per_seed", s.positive),
    ("sb3.runs", s.LIST),
)


def problems(data: dict[str, Any]) -> list[str]:
    cases = data.get("cases")
    if not isinstance(cases, dict) or not cases:
        return ["field 'cases' must be a non-empty dict of algorithm -> case"]
    found = []
    for name, case in cases.items():
        found += s.check(case, f"cases.{name}", _CASE)
        jaxsim = case.get("jaxsim") if isinstance(case, dict) else None
        found += solved.problems(jaxsim, f"cases.{name}.jaxsim", "per_seed_steps_to_return")
        if isinstance(case.get("sb3"), dict) and "skipped" not in case["sb3"]:
            found += s.check(case, f"cases.{name}", _SB3)
    return found


SUITE = Suite(
    name="offpolicy_solve",
    module="benchmarks.offpolicy_solve.measure",
    title="DQN and SAC time-to-solve beside Stable-Baselines3",
    heading="## Off-policy time to solve: DQN and SAC beside Stable-Baselines3",
    problems=problems,
    section=solve_section,
    no_record=(
        "Off-policy (DQN, SAC) time-to-solve beside Stable-Baselines3: not measured (no "
        "offpolicy_solve record: `python -m benchmarks.offpolicy_solve.measure` writes one; the "
        "learning results of `agents.train dqn|sac` are in agents/README.md)."
    ),
)
