"""Host side of training output: the progress line, metrics files (CSV, JSONL), learning curves."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
import threading
import time
from collections import defaultdict
from typing import Any, TextIO

import jax
import numpy as np

from atomicfiles import atomic_write, finite_json, write_figure_atomic

BASE_FIELDS = (
    "update",
    "step",
    "total_steps",
    "wall_time",
    "sps",
    "mean_return",
    "std_return",
    "episodes",
)
"""The columns of every algorithm's metrics; its loss columns (`LossInfo.COLUMNS`) follow."""


EVAL_FIELDS = ("eval_return", "solved_seeds")
"""The stop check's columns (runs with a target return), after the loss columns."""

_PER_SEED = ("returns", "eval_returns", "confirm_returns")  # lists: in metrics.jsonl only


def loss_fields(row: dict[str, Any]) -> list[str]:
    """A metrics row's loss columns: what it holds beyond BASE_FIELDS, the stop check's columns
    and the per-seed lists."""
    return [k for k in row if k not in BASE_FIELDS and k not in EVAL_FIELDS and k not in _PER_SEED]


def _finite_or_none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


class TrainingProgress:
    """Progress of a multi-seed run: one printed line and one metrics row per report.

    Two ways in. `report_chunk(...)` takes what the host holds between jitted chunks (the loop
    of `agents.loop.run_chunks`, which `agents.train` runs: no callback inside the compiled
    loop, so it can be cached). Called as a function, it is an agent's in-loop progress
    callback (`PPO(..., progress=...)`): under `vmap` the device calls it once per seed for each
    reported update, and it gathers `num_seeds` calls into one row. A row has steps,
    env-steps/s over all seeds, mean return +- std over seeds, the losses, and with stop checks
    the evaluation return and how many seeds are solved. Wall time counts from construction,
    compile included.
    """

    def __init__(
        self,
        num_seeds: int,
        num_updates: int,
        label: str = "ppo",
        stream: TextIO | None = sys.stdout,
        rows: list[dict[str, Any]] | None = None,
        wall_offset: float = 0.0,
    ):
        self.num_seeds = num_seeds
        self.num_updates = num_updates
        self.label = label
        self.stream = stream
        self.rows = list(rows or [])
        self.wall_offset = wall_offset
        self.t0 = time.perf_counter()
        self._last_time = self.t0
        self._last_steps = self.rows[-1]["total_steps"] if self.rows else 0
        self._pending: dict[int, list] = defaultdict(list)
        self._lock = threading.Lock()

    def wall_time(self) -> float:
        return self.wall_offset + time.perf_counter() - self.t0

    def __call__(self, metrics) -> None:
        with self._lock:
            update = int(np.asarray(metrics.update))
            self._pending[update].append(metrics)
            if len(self._pending[update]) == self.num_seeds:
                per_seed = self._pending.pop(update)
                self._emit(update, int(np.asarray(per_seed[0].steps)), per_seed)

    def report_chunk(
        self,
        update: int,
        steps: int,
        metrics,
        eval_returns: np.ndarray | None = None,
        solved: int | None = None,
        confirm_returns: np.ndarray | None = None,
    ) -> dict[str, Any]:
        """One row from a chunk's end: `metrics` has numpy leaves with a leading [num_seeds]
        axis (each seed's latest update); `eval_returns` [num_seeds] and `solved` (how many
        seeds are solved) come from a stop check, `confirm_returns` [num_seeds] (NaN: not run)
        from the independent evaluation that confirms a seed solved. Returns the row."""
        per_seed = [
            jax.tree.map(lambda x, s=s: np.asarray(x)[s], metrics) for s in range(self.num_seeds)
        ]
        extra = {}
        if eval_returns is not None:
            finite = np.asarray(eval_returns, dtype=float)
            extra = {
                "eval_return": _finite_or_none(float(finite.mean())),
                "eval_returns": [_finite_or_none(float(r)) for r in finite],
                "solved_seeds": int(solved or 0),
            }
        if confirm_returns is not None:
            confirm = np.asarray(confirm_returns, dtype=float)
            extra["confirm_returns"] = [_finite_or_none(float(r)) for r in confirm]
        with self._lock:
            return self._emit(update, steps, per_seed, extra)

    def _emit(self, update: int, steps: int, per_seed: list, extra=None) -> dict[str, Any]:
        now = time.perf_counter()
        returns = np.array([float(m.mean_return) for m in per_seed])
        total = steps * self.num_seeds
        sps = (total - self._last_steps) / max(now - self._last_time, 1e-9)
        self._last_time, self._last_steps = now, total

        def mean_of(get):
            return float(np.mean([float(get(m)) for m in per_seed]))

        finite = returns[np.isfinite(returns)]
        columns = type(per_seed[0].loss).COLUMNS  # {LossInfo attribute: column name}
        row = {
            "update": update,
            "step": steps,
            "total_steps": total,
            "wall_time": round(self.wall_offset + now - self.t0, 4),
            "sps": round(sps, 1),
            "mean_return": _finite_or_none(finite.mean()) if finite.size else None,
            "std_return": _finite_or_none(finite.std()) if finite.size else None,
            "episodes": int(sum(int(np.asarray(m.episodes)) for m in per_seed)),
            **{col: mean_of(lambda m, a=attr: getattr(m.loss, a)) for attr, col in columns.items()},
            "returns": [_finite_or_none(r) for r in returns],
            **(extra or {}),
        }
        self.rows.append(row)
        if self.stream is not None:
            ret = "n/a" if row["mean_return"] is None else f"{row['mean_return']:.1f}"
            if row["std_return"] is not None:
                ret += f" ± {row['std_return']:.1f}"
            check = ""
            if "eval_return" in row:
                value = "n/a" if row["eval_return"] is None else f"{row['eval_return']:.1f}"
                check = f"  eval {value} (solved {row['solved_seeds']}/{self.num_seeds})"
            print(
                f"[{self.label}] update {update}/{self.num_updates}  steps {steps:,}  "
                f"SPS {sps:,.0f}  return {ret}{check}  ({row['wall_time']:.1f} s)",
                file=self.stream,
                flush=True,
            )
        return row


def write_metrics(out_dir: str, rows: list[dict[str, Any]]) -> tuple[str, str]:
    """Rewrites metrics.jsonl and metrics.csv in `out_dir` atomically; returns their paths."""
    jsonl = os.path.join(out_dir, "metrics.jsonl")
    lines = (json.dumps(finite_json(r), allow_nan=False) + "\n" for r in rows)
    atomic_write(jsonl, "".join(lines).encode())
    fields = [*BASE_FIELDS, *(loss_fields(rows[0]) if rows else [])]
    fields += [f for f in EVAL_FIELDS if rows and f in rows[-1]]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: "" if r.get(k) is None else r[k] for k in fields})
    path_csv = os.path.join(out_dir, "metrics.csv")
    atomic_write(path_csv, buf.getvalue().encode())
    return jsonl, path_csv


def first_nonfinite(rows: list[dict[str, Any]]) -> tuple[int, str] | None:
    """(update, metric) of the first row whose loss metrics are NaN or inf, if any: a run that
    diverged. Returns are allowed to be missing (no episode ended yet)."""
    for row in rows:
        for name in loss_fields(row):
            value = row.get(name)
            if value is None or not math.isfinite(value):
                return row["update"], name
    return None


def read_metrics(out_dir: str) -> list[dict[str, Any]]:
    path = os.path.join(out_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def plot_curve(
    rows: list[dict[str, Any]],
    path: str,
    title: str,
    target: float | None = None,
    ylabel: str = "episode return (training)",
) -> str | None:
    """PNG of mean return +- std over seeds against env steps per seed; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot skipped: matplotlib is not installed", file=sys.stderr)
        return None
    rows = [r for r in rows if r["mean_return"] is not None]
    step = np.array([r["step"] for r in rows], dtype=float)
    mean = np.array([r["mean_return"] for r in rows], dtype=float)
    std = np.array([r["std_return"] or 0.0 for r in rows], dtype=float)
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    ax.plot(step, mean, color="C0", label="mean over seeds")
    ax.fill_between(step, mean - std, mean + std, color="C0", alpha=0.25, label="± std")
    if target is not None:
        ax.axhline(target, color="grey", linestyle="--", linewidth=1, label=f"target {target:g}")
    ax.set_xlabel("environment steps per seed")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    write_figure_atomic(fig, path)
    plt.close(fig)
    return path
