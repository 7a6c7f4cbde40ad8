"""The learning section of the results report: PPO time-to-solve beside Stable-Baselines3."""

from __future__ import annotations

from pathlib import Path

from benchmarks.formatting import (
    format_mean_std,
    format_rate,
    format_ratio,
    format_seconds,
    format_table,
)
from benchmarks.results_report.markdown import image, link, provenance_block
from benchmarks.results_report.records import Record


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
                f"{sum(s is not None for s in per_seed)}/{j['seeds']}",
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
                f"{sb3['seeds_reached']}/{len(runs)}",
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
        "reached",
        "env-steps to target (per seed)",
        "wall s to target",
        "train wall s",
        "of which compile s",
        "final eval return",
        "env-steps/s",
    ]
    parts.append(
        "Evaluation return of the deterministic policy; jaxsim trains its seeds at once "
        "(`jit(vmap(train))`), so its wall-clock times are for all seeds together, SB3's per "
        "seed (mean ± std over seeds). Train wall excludes evaluation, includes compile.\n\n"
        + format_table(headers, rows)
    )
    if sb3.get("library"):
        parts.append(f"SB3: {sb3['library']}, {sb3.get('hyperparameters', '')}.")
    elif sb3.get("skipped"):
        parts.append(f"Stable-Baselines3: not measured ({sb3['skipped']}).")
    cmp = d.get("comparison") or {}
    if cmp.get("speedup"):
        parts.append(
            "Same run, training wall-clock to the CartPole target, one SB3 seed ÷ jaxsim (all "
            f"seeds at once): **{format_ratio(cmp['speedup'])}** with jaxsim's compile included, "
            f"{format_ratio(cmp.get('speedup_excluding_jaxsim_compile'))} without it. "
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


def ppo_summary(r: Record) -> str | None:
    """One line: jaxsim's and SB3's training wall-clock to the CartPole target, same run."""
    j = (r.data.get("jaxsim") or {}).get("CartPole-v1")
    if not j or not j.get("reached"):
        return None
    text = (
        f"PPO on CartPole-v1 to a mean evaluation return of {j['target']:g} ({r.device}, "
        f"{r.mode} run): jaxsim trains {j['seeds']} seeds at once in "
        f"{j['train_wall_s_to_target']:.1f} s ({j['compile_s_in_train_wall']:.1f} s of it "
        "compiling)"
    )
    sb3 = r.data.get("sb3") or {}
    if sb3.get("mean_train_wall_s_to_target"):
        runs = len(sb3.get("runs", []))
        text += (
            f"; Stable-Baselines3 takes {sb3['mean_train_wall_s_to_target']:.1f} s per seed "
            f"(mean of {runs}) in the same run"
        )
    elif sb3.get("skipped"):
        text += f"; Stable-Baselines3 not measured ({sb3['skipped']})"
    return text + "."
