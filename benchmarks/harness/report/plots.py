"""The results report's plots (matplotlib, imported only when a plot is drawn)."""

from __future__ import annotations

import math
from pathlib import Path

from benchmarks.harness.report.records import Record
from benchmarks.results_report.throughput_tables import (
    IMPL_COLORS,
    IMPL_LABELS,
    ordered_impls,
    throughput_envs,
    throughput_points,
)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, path: Path) -> Path:
    """Writes `fig` to `path` without a date or version in it, so an unchanged plot stays the
    same file."""
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


def plot_throughput(r: Record, path: Path) -> Path:
    plt = _pyplot()
    envs = throughput_envs(r)
    cols = min(3, len(envs) + 1)
    rows = math.ceil((len(envs) + 1) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.6 * rows), squeeze=False)
    flat = list(axes.flat)
    handles = {}
    for ax, env_id in zip(flat, envs, strict=False):
        pts = [p for p in throughput_points(r) if p["env_id"] == env_id and p["status"] == "ok"]
        for impl in ordered_impls(pts):
            mine = sorted((p for p in pts if p["impl"] == impl), key=lambda p: p["num_envs"])
            x = [p["num_envs"] for p in mine]
            y = [p["steps_per_s"]["median"] for p in mine]
            err = [
                [yy - p["steps_per_s"]["min"] for yy, p in zip(y, mine, strict=True)],
                [p["steps_per_s"]["max"] - yy for yy, p in zip(y, mine, strict=True)],
            ]
            h = ax.errorbar(
                x,
                y,
                yerr=err,
                marker="o",
                ms=4,
                capsize=2,
                color=IMPL_COLORS.get(impl),
                label=IMPL_LABELS.get(impl, impl),
            )
            handles[impl] = h
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(env_id, fontsize=10)
        ax.set_xlabel("num_envs")
        ax.set_ylabel("env-steps/s")
        ax.grid(True, which="major", alpha=0.3)
    for ax in flat[len(envs) :]:
        ax.axis("off")
    legend_ax = flat[len(envs)] if len(flat) > len(envs) else flat[-1]
    order = [i for i in IMPL_LABELS if i in handles] + [i for i in handles if i not in IMPL_LABELS]
    legend_ax.legend(
        [handles[i] for i in order],
        [IMPL_LABELS.get(i, i) for i in order],
        loc="center",
        frameon=False,
    )
    p = r.prov
    fig.suptitle(
        f"Random-policy env-steps/s vs num_envs on {r.device}: median, min-max of repeats\n"
        f"{r.mode} run {r.utc}, commit {str(p.get('commit'))[:12]}",
        fontsize=10,
    )
    return _save(plt, fig, path)


def plot_fusion(r: Record, path: Path) -> Path | None:
    plt = _pyplot()
    pts = [p for p in r.data.get("results", []) if p["status"] == "ok"]
    series = sorted({(p["env_id"], p["policy"], p["outputs"], p["num_envs"]) for p in pts}, key=str)
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.2))
    cmap = plt.get_cmap("tab10")
    for i, key in enumerate(series):
        mine = [p for p in pts if (p["env_id"], p["policy"], p["outputs"], p["num_envs"]) == key]
        fused = sorted((p for p in mine if p["k"] is not None), key=lambda p: p["k"])
        label = f"{key[0]} {key[1]}/{key[2]} N={key[3]}"
        if fused:
            ax.plot(
                [p["k"] for p in fused],
                [p["steps_per_s"]["median"] for p in fused],
                marker="o",
                color=cmap(i % 10),
                label=f"fused, {label}",
            )
        for p in mine:
            if p["k"] is None:
                ax.axhline(
                    p["steps_per_s"]["median"],
                    ls="--",
                    color=cmap(i % 10),
                    lw=1,
                    label=f"scan, {label}",
                )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("K (steps per kernel launch)")
    ax.set_ylabel("env-steps/s")
    note = (
        "\nPallas INTERPRET mode: a correctness cost, not a speed"
        if r.data.get("interpret_mode")
        else ""
    )
    ax.set_title(f"Fused K sweep on {r.device}, {r.mode} run {r.utc}{note}", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return _save(plt, fig, path)


def plot_ppo(r: Record, path: Path) -> Path | None:
    plt = _pyplot()
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
    return _save(plt, fig, path)
