"""Markdown pieces every section of the results report uses: links, images, provenance."""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.harness.report.records import Record


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
        f"- **Command:** `{p.get('command', '?')}`",
    ]
    if p.get("env_vars"):
        lines.append(f"- **Environment:** `{p['env_vars']}`")
    if r.mode == "smoke":
        lines.append("- **Smoke record:** tiny sizes that check the pipeline; not a result.")
    return "\n".join(lines)
