"""The results report's plotting helpers (matplotlib, imported only when a plot is drawn)."""

from __future__ import annotations

from pathlib import Path


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(plt, fig, path: Path) -> Path:
    """Writes `fig` to `path` without a date or version in it, so an unchanged plot stays the
    same file."""
    fig.tight_layout()
    from atomicfiles import write_figure_atomic  # imports jax: only when a plot is drawn

    write_figure_atomic(fig, path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path
