"""Markdown pieces every section of the results report uses: links, images, provenance; and
its plots' helpers (matplotlib, imported only when a plot is drawn)."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

from benchmarks.report.records import Record

# Modules that have moved since records were written: a record keeps the command it ran, the
# report shows the command that runs it today.
MOVED = {
    "benchmarks.baselines": "benchmarks.baselines.torch_cartpole",
    **{f"benchmarks.{m}": f"benchmarks.baselines.{m}" for m in ("ppo_sb3", "offpolicy_sb3")},
    **{f"benchmarks.{m}": f"benchmarks.micro.{m}" for m in ("compact_reset", "reset_cost")},
    **{
        f"benchmarks.{m}": f"benchmarks.micro.{m}"
        for m in ("output_reuse", "sb3_front", "sweep_bench")
    },
    "benchmarks.gymnasium_front": "benchmarks.front.measure",
}
_MODULE = re.compile(r"(?<=-m )benchmarks\.\w+\b(?!\.)")


def current_command(command: str) -> str:
    """`command` with each `-m` module that has moved renamed: a suite's package is now run
    as its `measure` module (`benchmarks.fusion` -> `benchmarks.fusion.measure`), the shared
    baselines and the micro-benchmarks live in their folders (`MOVED`)."""

    def now(m: re.Match) -> str:
        name = m.group()
        if name in MOVED:
            return MOVED[name]
        spec = importlib.util.find_spec(name)  # a package's spec: no code of it runs
        if spec is None or spec.submodule_search_locations is None:
            return name
        return f"{name}.measure" if importlib.util.find_spec(f"{name}.measure") else name

    return _MODULE.sub(now, command)


def link(path: Path, base: Path, text: str | None = None) -> str:
    rel = os.path.relpath(path, base)
    return f"[{text or rel}]({rel})"


def image(path: Path, base: Path, alt: str) -> str:
    return f"![{alt}]({os.path.relpath(path, base)})"


def provenance_block(r: Record, base: Path) -> str:
    p = r.prov
    versions = ", ".join(f"{k} {v}" for k, v in (p.get("versions") or {}).items() if v)
    missing = [k for k, v in (p.get("versions") or {}).items() if not v]
    load = p.get("loadavg_1_5_15min")
    host = "" if r.is_gpu else f", {p.get('cpu_count_available', '?')} cores available to it"
    lines = [
        f"- **Device:** {r.device}{host}; host `{p.get('hostname', '?')}`"
        + (f"; load average {' / '.join(map(str, load))} at start" if load else ""),
        f"- **Software:** Python {p.get('python', '?')}; {versions}"
        + (f" (not installed: {', '.join(missing)})" if missing else ""),
        f"- **Commit:** `{p.get('commit', '?')}`; **run:** {r.utc}, {r.mode} mode"
        + (f", {r.data['wall_s']} s" if r.data.get("wall_s") is not None else "")
        + f"; **record:** {link(r.path, base, '`' + r.path.name + '`')}",
        f"- **Command:** `{current_command(p.get('command', '?'))}`",
    ]
    if p.get("env_vars"):
        lines.append(f"- **Environment:** `{p['env_vars']}`")
    if r.mode == "smoke":
        lines.append("- **Smoke record:** tiny sizes that check the pipeline; not a result.")
    return "\n".join(lines)


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
