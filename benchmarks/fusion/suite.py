"""The fusion suite: scan against fused rollouts over K, the steps fused per kernel launch.

Its section of the results report: the K sweep and its checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness.formatting import format_rate, format_ratio, format_seconds, format_table
from benchmarks.harness.suite import Plan, Suite
from benchmarks.report import schema as s
from benchmarks.report.markdown import image, provenance_block, pyplot, save
from benchmarks.report.records import Record


def fusion_ratios(r: Record) -> list[dict[str, Any]]:
    """Each fused point with its ratio to the scan at the same env, policy, outputs and N."""
    pts = [p for p in r.data.get("results", []) if p["status"] == "ok"]
    scan = {
        (p["env_id"], p["policy"], p["outputs"], p["num_envs"]): p
        for p in pts
        if p["backend"] == "scan"
    }
    out = []
    for p in pts:
        if p["backend"] != "fused":
            continue
        s = scan.get((p["env_id"], p["policy"], p["outputs"], p["num_envs"]))
        out.append(
            {**p, "ratio": p["steps_per_s"]["median"] / s["steps_per_s"]["median"] if s else None}
        )
    return out


def fusion_section(r: Record, base: Path, plot: Path | None) -> str:
    interpret = r.data.get("interpret_mode")
    parts = [f"### Scan vs fused rollouts: {r.device}", provenance_block(r, base)]
    if interpret:
        parts.append(
            "**Pallas interpret mode (no GPU):** the fused kernel is emulated on the CPU, so "
            "its figures are the cost of checking it here, **not a speed**; fused ÷ scan below "
            "says nothing about a GPU."
        )
    checks = r.data.get("checks", {})
    if checks:
        ok = sum(bool(c.get("pass")) for c in checks.values())
        worst = max((c.get("max_rel_err") or 0.0 for c in checks.values()), default=0.0)
        parts.append(
            f"Fused against scan at a small ragged size: {ok}/{len(checks)} checks pass "
            f"(largest relative float error {worst:.2g}; integers and flags identical where "
            "they pass)."
        )
    if plot is not None:
        parts.append(image(plot, base, f"fused K sweep on {r.device}"))
    ratios = {
        (p["env_id"], p["policy"], p["outputs"], p["num_envs"], p["k"]): p["ratio"]
        for p in fusion_ratios(r)
    }
    rows = []
    for p in r.data.get("results", []):
        label = "scan" if p["k"] is None else f"fused K={p['k']}"
        point = [p["env_id"], p["policy"], p["outputs"], p["num_envs"], label]
        if p["status"] != "ok":
            rows.append([*point, p["status"], "", "", "", ""])
            continue
        key = (p["env_id"], p["policy"], p["outputs"], p["num_envs"], p["k"])
        bw = p.get("pct_bandwidth_floor")
        rows.append(
            [
                *point,
                format_rate(p["steps_per_s"]["median"]),
                "–" if p["k"] is None else format_ratio(ratios.get(key)),
                "–" if p.get("bytes_per_step") is None else f"{p['bytes_per_step']:.1f}",
                "–" if bw is None else f"{bw:.0f}%",
                format_seconds(p.get("compile_s")),
            ]
        )
    headers = [
        "env",
        "policy",
        "outputs",
        "N",
        "backend",
        "env-steps/s",
        "÷ scan",
        "bytes/step",
        "% BW floor",
        "compile s",
    ]
    parts.append(format_table(headers, rows))
    targets = r.data.get("targets") or []
    if targets:
        trows = [
            [
                f"{t['name']} ({t['outputs']}) @ N={t['num_envs']}",
                "–" if t.get("value") is None else f"{t['value']:.3g} (K={t.get('best_k')})",
                f">= {t['min']:g}",
                t["status"],
            ]
            for t in targets
        ]
        parts.append(format_table(["target", "value", "required", "result"], trows))
    return "\n\n".join(parts)


def plot_fusion(r: Record, path: Path) -> Path | None:
    plt = pyplot()
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
    return save(plt, fig, path)


def args(p: Plan) -> list[str]:
    if p.mode == "smoke":
        return (
            "--policies random --outputs stats --num-envs 256 --k 4 --steps 8 --min-time 0".split()
        )
    if p.on_gpu:
        return ["--quick"] if p.mode == "quick" else []
    # On a CPU the kernel runs in Pallas interpret mode: a correctness cost, kept small.
    if p.mode == "quick":  # the random policy's pair; full runs add the MLP policy's
        return "--quick --policies random --outputs rewards --k 1,16 --min-time 0.1".split()
    return "--k 1,4,16,64".split()


def problems(data: dict[str, Any]) -> list[str]:
    point = (
        ("env_id", s.STR),
        ("policy", s.STR),
        ("outputs", s.STR),
        ("num_envs", s.INT),
        ("backend", s.STR),
        ("k", s.optional(s.INT)),
        ("status", s.STR),
    )
    ok = (("steps_per_s.median", s.positive), ("compile_s", s.optional(s.non_negative)))
    return s.points(data, point, ok)


SUITE = Suite(
    name="fusion",
    module="benchmarks.fusion.measure",
    title="scan vs fused rollouts, K sweep (Pallas interpret mode on a CPU)",
    heading="## Scan vs fused (K sweep)",
    problems=problems,
    section=fusion_section,
    args=args,
    plot=plot_fusion,
)
