"""Stacked-bar PNGs of profile breakdowns (matplotlib is optional)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from atomicfiles import write_figure_atomic

# Host and idle rows in greys, so device phases stand out.
_FIXED_COLORS = {
    "(unscoped)": "#8c564b",
    "(dispatch)": "#bdbdbd",
    "(python)": "#969696",
    "(idle)": "#f0f0f0",
}
_PALETTE = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#17becf", "#e377c2", "#bcbd22",
    "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#9edae5", "#f7b6d2", "#dbdb8d",
]  # fmt: skip


def matplotlib_missing() -> str | None:
    """None if matplotlib imports, else the reason PNGs are skipped."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as e:
        return f"PNG skipped: matplotlib is not installed ({e}); pip install matplotlib"
    return None


def plot_stacked(
    bars: Mapping[str, Mapping[str, float]],
    path: str | os.PathLike,
    *,
    title: str = "",
    unit_s: float = 1e-3,
    colors: Mapping[str, str] | None = None,
) -> None:
    """Saves a PNG of one 100%-stacked bar per entry of `bars` (label -> {segment: seconds}).

    Each bar is labelled with its total (in ms by default); segments keep one colour across bars
    (`colors` may fix some: segment -> matplotlib colour).

    Raises:
      ImportError: matplotlib is not installed (see `matplotlib_missing`).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    segments: list[str] = []
    for parts in bars.values():
        segments += [s for s, v in parts.items() if v > 0 and s not in segments]
    fixed = {**_FIXED_COLORS, **(colors or {})}
    colors, k = {}, 0
    for s in segments:
        if s in fixed:
            colors[s] = fixed[s]
        else:
            colors[s] = _PALETTE[k % len(_PALETTE)]
            k += 1
    fig = Figure(figsize=(max(4.0, 1.6 * len(bars) + 3.0), 4.8), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    labels = list(bars)
    labelled: set[str] = set()
    for i, label in enumerate(labels):
        total = sum(v for v in bars[label].values() if v > 0)
        bottom = 0.0
        for s in segments:
            v = bars[label].get(s, 0.0)
            if v <= 0 or total <= 0:
                continue
            h = 100.0 * v / total
            legend = None if s in labelled else s
            labelled.add(s)
            ax.bar(i, h, bottom=bottom, color=colors[s], edgecolor="white", lw=0.5, label=legend)
            if h >= 6:
                ax.text(i, bottom + h / 2, f"{h:.0f}%", ha="center", va="center", fontsize=7)
            bottom += h
        ax.text(i, 101, f"{total / unit_s:.3g} ms", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(labels)), labels, rotation=15 if len(labels) > 3 else 0)
    ax.set_ylabel("share of wall time per iteration (%)")
    ax.set_ylim(0, 110)
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    write_figure_atomic(fig, path, dpi=120)


_RESOURCE_COLORS = {"device": "#1f77b4", "device idle": "#aec7e8", "host": "#969696"}


def plot_report(report, path: str | os.PathLike) -> None:
    """Saves a PNG of one report: a bar per phase (and host row), stacked by resource.

    Device time, device idle time between the phase's kernels and host time, as shares of the
    wall time; the title gives the wall time and the device-busy fraction.

    Raises:
      ImportError: matplotlib is not installed (see `matplotlib_missing`).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    parts = report.by_resource()
    labels = list(parts)[::-1]  # first row on top
    fig = Figure(figsize=(8.0, 1.2 + 0.35 * max(len(labels), 1)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    wall = report.wall_s if report.wall_s > 0 else 1.0
    order = list(_RESOURCE_COLORS)
    for n, (resource, color) in enumerate(_RESOURCE_COLORS.items()):
        left = [sum(100.0 * parts[r][k] / wall for k in order[:n]) for r in labels]
        widths = [100.0 * parts[r][resource] / wall for r in labels]
        ax.barh(labels, widths, left=left, color=color, edgecolor="white", lw=0.5, label=resource)
    for i, r in enumerate(labels):
        share = 100.0 * sum(parts[r].values()) / wall
        ax.text(share + 0.5, i, f"{share:.1f}%", va="center", fontsize=7)
    unit = "s in all" if report.mode == "program" else "ms per iteration"
    scale = 1.0 if report.mode == "program" else 1e3
    ax.set_xlabel("share of wall time (%)")
    ax.set_xlim(0, 110)
    ax.set_title(
        f"{report.name}: {scale * report.wall_s:.4g} {unit} ({report.backend}), device busy "
        f"{100 * report.device_busy_fraction:.1f}%",
        fontsize=10,
    )
    ax.legend(loc="lower right", fontsize=8, frameon=False)
    write_figure_atomic(fig, path, dpi=120)
