"""The ppo suite: PPO's time to solve, Stable-Baselines3 beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness import solved
from benchmarks.harness.formatting import (
    format_mean_std,
    format_rate,
    format_ratio,
    format_seconds,
    format_table,
)
from benchmarks.harness.solved import (
    MIN_EPISODES,
    rejected_note,
    rule_sentence,
    solved_cell,
    under_rule,
)
from benchmarks.harness.suite import Plan, Suite
from benchmarks.report import schema as s
from benchmarks.report.markdown import image, link, provenance_block, pyplot, save
from benchmarks.report.records import Record


def ppo_section(r: Record, base: Path, plot: Path | None) -> str:
    d = r.data
    parts = [f"### PPO time-to-solve: {r.device}", provenance_block(r, base)]
    if d.get("quick"):
        parts.append("**`--quick` record: tiny budgets that check the suite runs; not a result.**")
    rows = []
    for env_id, j in d.get("jaxsim", {}).items():
        per_seed = j.get("per_seed_steps_to_target") or []
        finals = (j.get("curve") or [{}])[-1].get("per_seed") or []
        rows.append(
            [
                f"jaxsim PPO, {env_id}",
                j["seeds"],
                j["target"],
                solved_cell(j, "per_seed_steps_to_target"),
                format_mean_std(per_seed, "{:,.0f}"),
                format_seconds(j.get("wall_s_to_target")),
                format_seconds(j.get("train_wall_s_to_target")),
                format_seconds(j.get("compile_s_in_train_wall")),
                format_mean_std(finals, "{:.1f}"),
                f"{j['sps_whole_loop']:,.0f}",
            ]
        )
    sb3 = d.get("sb3") or {}
    if sb3.get("runs"):
        runs = sb3["runs"]
        rows.append(
            [
                "SB3 PPO (reference), CartPole-v1",
                len(runs),
                475.0,
                solved_cell(_sb3_solved(runs), "steps"),
                format_mean_std([x["steps_to_target"] for x in runs], "{:,.0f}"),
                format_mean_std([x["wall_s_to_target"] for x in runs], "{:.1f}"),
                format_mean_std([x["train_wall_s_to_target"] for x in runs], "{:.1f}"),
                "–",
                format_mean_std(
                    [x["curve"][-1]["mean_return"] for x in runs if x["curve"]], "{:.1f}"
                ),
                f"{sb3['mean_sps_whole_loop']:,.0f}",
            ]
        )
    headers = [
        "run",
        "seeds",
        "target",
        "solved",
        "env-steps to solved (per seed)",
        "wall s to target",
        "train wall s",
        "of which compile s",
        "final eval return",
        "env-steps/s",
    ]
    parts.append(
        "Evaluation return of the deterministic policy; jaxsim trains its seeds at once "
        "(`jit(vmap(train))`), so its wall-clock times are for all seeds together, SB3's per "
        "seed (mean ± std over seeds). Train wall excludes evaluation, includes compile. "
        + rule_sentence(under_rule(list(d.get("jaxsim", {}).values())))
        + "\n\n"
        + format_table(headers, rows)
    )
    notes = [rejected_note(f"jaxsim {env_id}", j.get("rejected_checks") or [])
             for env_id, j in d.get("jaxsim", {}).items()]  # fmt: skip
    notes += [
        rejected_note(f"SB3 seed {x['seed']}", x.get("rejected_checks") or [])
        for x in sb3.get("runs") or []
    ]
    parts.extend(n for n in notes if n)
    if sb3.get("library"):
        parts.append(f"SB3: {sb3['library']}, {sb3.get('hyperparameters', '')}.")
    elif sb3.get("skipped"):
        parts.append(f"Stable-Baselines3: not measured ({sb3['skipped']}).")
    cmp = d.get("comparison") or {}
    if cmp.get("speedup") and cmp.get("speedup_cold"):
        parts.append(
            "Same run, training wall-clock to a solved CartPole agent per seed, SB3 (median "
            "seed) ÷ jaxsim (all seeds at once ÷ seeds): "
            f"**{format_ratio(cmp['speedup'])}** warm (persistent compilation cache filled), "
            f"**{format_ratio(cmp['speedup_cold'])}** cold (compile included). "
            f"Training env-steps/s: jaxsim {format_rate(cmp.get('jaxsim_sps_whole_loop'))}, "
            f"SB3 {format_rate(cmp.get('sb3_sps_whole_loop'))}."
        )
    gpu = d.get("gpu_training_sps") or {}
    if gpu.get("status") == "unmeasured":
        parts.append(f"Training env-steps/s on a GPU: not measured ({gpu.get('reason')}).")
    pictures = sorted(r.path.parent.glob(f"{r.path.stem}_*.png"))
    if plot is not None:
        pictures.insert(0, plot)
    if pictures:
        parts.append("Learning curves: " + ", ".join(link(p, base, p.name) for p in pictures))
        if plot is not None:
            parts.append(image(plot, base, "learning curves"))
    return "\n\n".join(parts)


def _sb3_solved(runs: list[dict]) -> dict:
    """SB3's runs as `solved_cell` reads a run: per seed solved (None before the rule)."""
    flags = [x["solved"] for x in runs] if all("solved" in x for x in runs) else None
    return {"solved_per_seed": flags, "steps": [x["steps_to_target"] for x in runs]}


def ppo_summary(r: Record) -> str | None:
    """One line: time to a solved CartPole agent per seed, jaxsim (warm and cold) and SB3."""
    j = (r.data.get("jaxsim") or {}).get("CartPole-v1")
    if not j or not j.get("reached"):
        return None
    if j.get("per_seed_train_wall_s_to_target") is None:  # a record from before per-seed times
        return None
    solved = (
        f"every seed's stop check and an independent evaluation of >= {MIN_EPISODES} episodes "
        f">= {j['target']:g}"
        if "solved_per_seed" in j
        else f"every seed's deterministic evaluation >= {j['target']:g}"
    )
    text = (
        f"PPO to a solved CartPole-v1 ({solved}; "
        f"{r.device}, {r.mode} run): jaxsim {j['per_seed_train_wall_s_to_target']:.2f} s per "
        f"seed cold, {j['warm_per_seed_train_wall_s_to_target']:.2f} s warm ({j['seeds']} seeds "
        f"at once; the loop's cold compile {j['compile_s_training_loop']:.1f} s)"
    )
    cmp = r.data.get("comparison") or {}
    sb3 = r.data.get("sb3") or {}
    if cmp.get("sb3_1_thread_per_seed_s"):
        # Against SB3's faster setting: its default threads can collapse on a loaded machine.
        text += (
            f"; Stable-Baselines3 {cmp['sb3_1_thread_per_seed_s']:.1f} s per seed with one "
            f"torch thread ({format_seconds(cmp.get('sb3_per_seed_s'))} s with its default "
            f"threads) in the same run: {format_ratio(cmp.get('speedup_vs_1_thread'))} warm, "
            f"{format_ratio(cmp.get('speedup_cold_vs_1_thread'))} cold"
        )
    elif sb3.get("skipped"):
        text += f"; Stable-Baselines3 not measured ({sb3['skipped']})"
    proc = r.data.get("whole_process") or {}
    if proc.get("speedup_warm_vs_sb3_1_thread"):
        text += (
            f"; as whole processes (`python -m agents.train ppo --env CartPole-v1 --seeds 3` "
            "against one SB3 process per seed, 1 torch thread) "
            f"{format_ratio(proc['speedup_warm_vs_sb3_1_thread'])} warm, "
            f"{format_ratio(proc.get('speedup_cold_vs_sb3_1_thread'))} cold"
        )
    return text + "."


def plot_ppo(r: Record, path: Path) -> Path | None:
    plt = pyplot()
    j = (r.data.get("jaxsim") or {}).get("CartPole-v1")
    if not j or not j.get("curve"):
        return None
    sb3 = (r.data.get("sb3") or {}).get("runs") or []
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    curve = j["curve"]
    mean = [p["mean_return"] for p in curve]
    std = [p["std_return"] for p in curve]
    for ax, key, xlabel in (
        (axes[0], "step", "env-steps per seed"),
        (axes[1], "train_wall_s", "training wall-clock s (compile incl.)"),
    ):
        x = [p[key] for p in curve]
        ax.plot(x, mean, color="#d62728", label=f"jaxsim PPO, {j['seeds']} seeds at once")
        ax.fill_between(
            x,
            [m - s for m, s in zip(mean, std, strict=True)],
            [m + s for m, s in zip(mean, std, strict=True)],
            color="#d62728",
            alpha=0.2,
        )
        for i, run in enumerate(sb3):
            if run["curve"]:
                ax.plot(
                    [p[key] for p in run["curve"]],
                    [p["mean_return"] for p in run["curve"]],
                    color="#1f77b4",
                    alpha=0.8,
                    marker=".",
                    ms=4,
                    label="SB3 PPO, one run per seed" if i == 0 else None,
                )
        ax.axhline(j["target"], ls=":", color="k", lw=1, label="target")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("evaluation return")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"CartPole-v1 PPO on {r.device}, {r.mode} run {r.utc}", fontsize=10)
    return save(plt, fig, path)


_RUN = (("seeds", s.INT), ("target", s.NUMBER), ("sps_whole_loop", s.positive))
_SB3 = (("seeds_reached", s.INT), ("mean_sps_whole_loop", s.positive), ("runs", s.LIST))
_COMPARISON = (
    ("speedup", s.optional(s.positive)),
    ("speedup_excluding_jaxsim_compile", s.optional(s.positive)),
)


def args(p: Plan) -> list[str]:
    sb3 = [] if "sb3" in p.baselines else ["--no-sb3"]
    if p.mode == "smoke":
        return ("--envs CartPole-v1 --seeds 1 --total-steps 1024 --warm-repeats 1 --no-sb3 "
                "--no-whole-process --no-gpu-sps").split()  # fmt: skip
    if p.mode == "quick":
        # A real time-to-solve on CartPole (3 seeds at once), SB3 with one seed beside it.
        return ["--envs", "CartPole-v1", "--sb3-seeds", "1", "--no-whole-process", *sb3]
    return sb3


def problems(data: dict[str, Any]) -> list[str]:
    found = s.check(data, "", (("jaxsim", s.DICT),))
    for env_id, run in (data.get("jaxsim") or {}).items():
        found += s.check(run, f"jaxsim.{env_id}", _RUN)
        found += solved.problems(run, f"jaxsim.{env_id}", "per_seed_steps_to_target")
    sb3 = data.get("sb3") or {}
    if sb3.get("runs"):
        found += s.check(sb3, "sb3", _SB3)
        for i, run in enumerate(sb3["runs"] if isinstance(sb3["runs"], list) else []):
            if isinstance(run, dict) and "solved" in run:
                found += solved.problems(
                    {"solved_per_seed": [run["solved"]], "steps": [run.get("steps_to_target")]},
                    f"sb3.runs[{i}]",
                    "steps",
                )
    return found + s.check(data.get("comparison"), "comparison", _COMPARISON, False)


SUITE = Suite(
    name="ppo",
    module="benchmarks.ppo.measure",
    title="PPO time-to-solve, Stable-Baselines3 beside it",
    heading="## Learning: time to solve",
    problems=problems,
    section=ppo_section,
    args=args,
    plot=plot_ppo,
)
