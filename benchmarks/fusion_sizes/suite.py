"""The sizes suite: scan against fused on Swarm-v0 as its state grows, beside a traffic model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness.formatting import format_table
from benchmarks.harness.suite import Plan, Suite
from benchmarks.report import schema as s
from benchmarks.report.markdown import image, provenance_block, pyplot, save
from benchmarks.report.records import Record

PUBLISHED = {"cartpole": 11.3, "largest": 1024.0}  # arXiv 2207.07736, fused vs unfused steps


def sizes_table(rows) -> str:
    """One row per (N, outputs): the traffic model beside the measured fused/scan ratio."""
    table = []
    for r in rows:
        m = r["model"]
        best = max(r["model"]["predicted_ratio"].values())
        ratio = r["measured_ratio"]
        table.append([
            r["num_particles"], m["state_bytes_per_env"], r["outputs"], r["block_envs"],
            f"{m['scan_bytes_per_step']:.0f}", f"{min(m['fused_bytes_per_step'].values()):.1f}",
            f"{best:.1f}x",
            "–" if ratio is None else f"{ratio:.3g}x" + (" (interp)" * r["interpret"]),
            "pass" if r["check"].get("pass") else "FAIL",
        ])  # fmt: skip
    headers = ["N", "state B", "outputs", "block", "scan B/step", "fused B/step", "model x",
               "measured x", "check"]  # fmt: skip
    return format_table(headers, table)


def minatar_table(rows) -> str:
    """One row per (MinAtar game, outputs): bytes per env-step and the predicted fused/scan."""
    table = []
    for r in rows:
        m = r["model"]
        fused = m["fused_bytes_per_step"]
        best = max(fused, key=lambda k: m["predicted_ratio"][k])
        table.append([
            r["env_id"], r["channels"], m["state_bytes_per_env"], r["outputs"],
            m["output_bytes_per_step"], f"{m['scan_bytes_per_step']:.0f}",
            f"{fused[best]:.1f} (K={best})", f"{m['predicted_ratio'][best]:.2f}x",
        ])  # fmt: skip
    headers = ["game", "C", "state B", "outputs", "written B/step", "scan B/step", "fused B/step",
               "model x"]  # fmt: skip
    return format_table(headers, table)


def plot_sizes(result: dict[str, Any], path: Path) -> Path:
    """Predicted and measured fused/scan against state bytes per environment (matplotlib)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.4))
    for i, outputs in enumerate(sorted({r["outputs"] for r in result["rows"]})):
        rows = sorted(
            (r for r in result["rows"] if r["outputs"] == outputs), key=lambda r: r["num_particles"]
        )
        x = [r["model"]["state_bytes_per_env"] for r in rows]
        predicted = [max(r["model"]["predicted_ratio"].values()) for r in rows]
        ax.plot(x, predicted, "--", color=f"C{i}", label=f"traffic model, H200, outputs={outputs}")
        got = [
            (xi, r["measured_ratio"]) for xi, r in zip(x, rows, strict=True) if r["measured_ratio"]
        ]
        if got:
            kind = "CPU interpret (not a speed)" if result["interpret_mode"] else "measured"
            gx, gy = zip(*got, strict=True)
            ax.plot(gx, gy, "o-", color=f"C{i}", label=f"{kind}, outputs={outputs}")
    left = min(r["model"]["state_bytes_per_env"] for r in result["rows"])
    for name, value in PUBLISHED.items():
        ax.axhline(value, color="grey", lw=0.8, ls=":")
        ax.text(left, value, f" published ({name}): {value:g}x", fontsize=7, va="bottom")
    ax.axhline(1.0, color="black", lw=0.6)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("state bytes per environment (Swarm-v0, N particles: 20 N + 4)")
    ax.set_ylabel("fused / scan env-steps/s (best K)")
    prov = result["provenance"]
    ax.set_title(
        f"Fusion vs simulator size on {prov['device_kind']}, jax {prov['versions']['jax']}",
        fontsize=9,
    )
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return save(plt, fig, path)


def sizes_section(r: Record, base: Path, plot: Path | None) -> str:
    d = r.data
    parts = [f"### Swarm-v0 as its state grows: {r.device}", provenance_block(r, base)]
    kind = (
        "On this device the kernel runs in Pallas interpret mode: *measured x* is a "
        "correctness cost, not a speed; only the traffic model speaks for a GPU."
        if d.get("interpret_mode")
        else "*measured x* is fused over scan env-steps/s on this device."
    )
    parts.append(
        "Scan against fused rollouts of `Swarm-v0` (N particles, 20 N + 4 bytes of state per "
        "environment) beside a traffic model: bytes per env-step each moves (the scan reads and "
        "writes the state every step, the kernel once per launch of K steps; both write the "
        "kept outputs), and the fused/scan ratio it predicts when memory-bound on the H200 "
        f"(*model x*). Published: {PUBLISHED['cartpole']:g}x on cartpole, up to "
        f"{PUBLISHED['largest']:g}x as the simulator's traffic grows (arXiv 2207.07736). {kind}"
    )
    parts.append(sizes_table(d["rows"]))
    if d.get("minatar_traffic"):
        parts.append(
            "The MinAtar games' bytes per env-step under the same model (shapes only; a kept "
            "grid is 100 C bool cells, 100 C bytes (400 C in records made while they were "
            "float32), which the kernel writes as 40 C bytes of packed row words that XLA then "
            "unpacks):"
        )
        parts.append(minatar_table(d["minatar_traffic"]))
    if plot is not None:
        parts.append(image(plot, base, f"fusion vs simulator size on {r.device}"))
    return "\n\n".join(parts)


_ROW = (
    ("num_particles", s.INT),
    ("outputs", s.STR),
    ("model.state_bytes_per_env", s.positive),
    ("model.scan_bytes_per_step", s.positive),
    ("model.fused_bytes_per_step", s.DICT),
    ("model.predicted_ratio", s.DICT),
    ("measured_ratio", s.optional(s.positive)),
    ("check", s.DICT),
    ("points", s.LIST),
)


def args(p: Plan) -> list[str]:
    if p.mode == "smoke":
        return "--sizes 1,16 --outputs rewards --num-envs 8 --steps 4 --k 2 --min-time 0".split()
    if p.on_gpu:
        return [] if p.mode == "full" else "--sizes 1024,64,1 --budget-s 120".split()
    # On a CPU the kernel runs in Pallas interpret mode: a correctness cost, kept small.
    return "--sizes 1,256 --outputs rewards".split() if p.mode == "quick" else []


def problems(data: dict[str, Any]) -> list[str]:
    found = s.check(data, "", (("rows", s.LIST), ("interpret_mode", s.BOOL)))
    for i, row in enumerate(data.get("rows") or []):
        found += s.check(row, f"rows[{i}]", _ROW)
    return found


def _plot(r, path: Path) -> Path:
    return plot_sizes(r.data, path)


SUITE = Suite(
    name="sizes",
    module="benchmarks.fusion_sizes.measure",
    title="scan vs fused on Swarm-v0 as its state grows, beside a traffic model",
    heading="## Fusion vs simulator size",
    problems=problems,
    section=sizes_section,
    args=args,
    plot=_plot,
)
