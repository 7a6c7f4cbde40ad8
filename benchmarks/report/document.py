"""RESULTS.md from the records: one section per benchmark, the headline, the run log."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import registry
from benchmarks.harness.formatting import format_seconds, format_table
from benchmarks.harness.suite import Suite
from benchmarks.offpolicy.suite import off_policy_reason
from benchmarks.report.headline import headline_table
from benchmarks.report.markdown import current_command, link
from benchmarks.report.readme import readme_section, summary_text
from benchmarks.report.records import (
    MODE_ORDER,
    InvalidRecord,
    Record,
    load_manifest,
    load_records,
    select,
    would_have_been_chosen,
)
from benchmarks.report.schema import base_problems


@dataclasses.dataclass
class Report:
    """What `build` makes: RESULTS.md's text, the README section, and every file it could not
    use (also named in both texts)."""

    results_md: str
    readme_section: str
    summary: str  # the README section's tables without the published figures: for a console
    invalid: list[InvalidRecord]
    stale_notes: list[str]
    ignored: list[tuple[Path, str]]  # files under the record folders that are not records


def run_log_section(entries: Sequence[dict[str, Any]]) -> str:
    runs = [e for e in entries if e.get("event") == "run"]
    if not runs:
        return ""
    parts = ["## Front-door runs", "The last run of each mode (`runs.jsonl`):"]
    for mode in MODE_ORDER:
        mine = [e for e in runs if e.get("mode") == mode]
        if not mine:
            continue
        last = mine[-1]
        suites = [
            e
            for e in entries
            if e.get("run_id") == last["run_id"] and e.get("suite") and e.get("event") != "run"
        ]
        rows = [
            [
                e["suite"],
                e["status"],
                e.get("record") or "–",
                e.get("reason") or "",
                format_seconds(e.get("wall_s")),
            ]
            for e in suites
        ]
        parts.append(
            f"**{mode}** run `{last['run_id']}` ({last['status']}, {last.get('wall_s')} s): "
            f"`{current_command(last.get('command') or '?')}`\n\n"
            + format_table(["suite", "status", "record", "reason", "wall s"], rows, left=4)
        )
    return "\n\n".join(parts)


def gpu_checks_section(dirs: Iterable[Path], base: Path, invalid: list[InvalidRecord]) -> str:
    """gpu_check.sh's test summaries (gpu_tests.json beside environment.json); one it cannot
    read is added to `invalid`."""
    lines = []
    for d in dirs:
        for path in sorted(Path(d).rglob("gpu_tests.json")):
            try:
                tests = json.loads(path.read_text())
                env = json.loads((path.parent / "environment.json").read_text())
            except (OSError, json.JSONDecodeError) as e:
                invalid.append(InvalidRecord(path, f"GPU check summary unreadable: {e}"))
                continue
            counts = ", ".join(f"{v} {k}" for k, v in sorted((tests.get("counts") or {}).items()))
            devices = ", ".join(sorted(set(env.get("devices", []))))
            lines.append(
                f"- {devices} (jax {env.get('jax')}): GPU tests {tests.get('status')}"
                f" {counts} — {link(path, base, path.name)}"
            )
    return "## GPU checks (benchmarks/gpu_check.sh)\n\n" + "\n".join(lines) if lines else ""


# ------------------------------------------------------------------------------------- documents


def invalid_records_section(invalid: Sequence[InvalidRecord], base: Path) -> str:
    if not invalid:
        return ""
    lines = [
        f"- {link(bad.path, base, os.path.relpath(bad.path, base))}: {bad.reason}"
        for bad in invalid
    ]
    return (
        "## Invalid records\n\nNot used: each file below could not be read or lacks a field "
        "the report needs (or holds a figure it cannot divide by); fix or remove it.\n\n"
        + "\n".join(lines)
    )


def _stale_note(r: Record, invalid: Sequence[InvalidRecord], mode: str | None) -> str | None:
    newer = [bad for bad in invalid if would_have_been_chosen(bad, r, mode)]
    if not newer:
        return None
    names = ", ".join(f"`{bad.path.name}` ({bad.reason})" for bad in newer)
    return (
        f"**Newer record{'s' if len(newer) > 1 else ''} {names} "
        f"{'are' if len(newer) > 1 else 'is'} invalid; showing older record `{r.path.name}`.**"
    )


def _with_note(section: str, note: str | None) -> str:
    """`note` right under the section's heading."""
    if note is None:
        return section
    heading, _, rest = section.partition("\n\n")
    return f"{heading}\n\n{note}\n\n{rest}" if rest else f"{heading}\n\n{note}"


def checks(suites: dict[str, Suite]) -> dict[str, Callable[[dict[str, Any]], list[str]]]:
    """benchmark -> the problems of one of its records (what every record needs, then what its
    suite's schema needs), in the report's order."""
    return {
        b: functools.partial(base_problems, suite_problems=s.problems) for b, s in suites.items()
    }


def _plots(
    selected: Sequence[Record],
    suites: dict[str, Suite],
    plots: bool,
    notes: list[str],
    plot_dir: Path | None,
) -> dict[Path, Path | None]:
    """Draws each selected record's plot into `plot_dir` (None: beside the record); what fails
    goes to `notes`."""
    paths: dict[Path, Path | None] = {}
    for r in selected:
        paths[r.path] = None
        plot = suites[r.benchmark].plot
        if plots and plot is not None:
            try:
                paths[r.path] = plot(r, (plot_dir or r.path.parent) / f"report_{r.path.stem}.png")
            except ImportError as e:
                notes.append(f"plots skipped: matplotlib is not installed ({e})")
                plots = False
            except Exception as e:  # a record of a newer or older schema: say so, carry on
                notes.append(f"plot of {r.path.name} failed: {type(e).__name__}: {e}")
    return paths


def build(
    results_dirs: Sequence[Path],
    out_md: Path,
    mode: str | None,
    plots: bool,
    readme: Path,
    plot_dir: Path | None = None,
) -> Report:
    """The report of the records under `results_dirs`; writes the plots into `plot_dir` (None:
    beside their records)."""
    suites = registry.by_benchmark()
    found = load_records(results_dirs, checks(suites))
    invalid = found.invalid
    entries, bad_lines = load_manifest(results_dirs)
    invalid += bad_lines
    scopes = {key: suite.scope for key, suite in suites.items() if suite.scope}
    selected = select(found.records, list(suites), mode, scopes)
    off_policy = off_policy_reason(entries)
    base = out_md.parent
    plot_notes: list[str] = []
    plot_paths = _plots(selected, suites, plots, plot_notes, plot_dir)
    sections: dict[str, list[str]] = {key: [] for key in suites}
    stale_notes = []
    for r in selected:
        try:
            text = suites[r.benchmark].section(r, base, plot_paths.get(r.path))
        except Exception as e:  # the checks missed a field: say which record, carry on
            text = (
                f"### {r.benchmark}: {r.device}\n\nCould not render "
                f"{link(r.path, base, r.path.name)}: {type(e).__name__}: {e}"
            )
        note = _stale_note(r, invalid, mode)
        if note:
            stale_notes.append(note.strip("*"))
        sections[r.benchmark].append(_with_note(text, note))
    gpu_checks = gpu_checks_section(results_dirs, base, invalid)
    used = sorted({r.path for r in selected})
    doc = [
        "# jaxsim benchmark results",
        "Generated by `python -m benchmarks report` from the JSON records in "
        + ", ".join(f"`{os.path.relpath(d, base)}/`" for d in results_dirs)
        + "; do not edit by hand. Reproduce with `python -m benchmarks run --quick` (or "
        "`--full`: records and a report under runs/bench/<run>/); `python -m benchmarks report "
        "--publish --results runs/bench/<run>` publishes them here. Ratios are computed within "
        "one run (one record); absolute figures depend on the machine and its load, recorded "
        "beside each.",
        invalid_records_section(invalid, base),
        "## Published figures beside jaxsim's",
        headline_table(selected, off_policy),
    ]
    for key, suite in suites.items():
        doc.append(suite.heading)
        if sections[key]:
            doc.extend(sections[key])
        else:
            unusable = [bad for bad in invalid if bad.benchmark == key]
            doc.append(
                "No valid record: "
                + "; ".join(f"`{bad.path.name}` is invalid ({bad.reason})" for bad in unusable)
                + "."
                if unusable
                else "No record."
            )
        if suite.no_record and not sections[key]:
            doc.append(suite.no_record)
    for extra in (gpu_checks, run_log_section(entries)):
        if extra:
            doc.append(extra)
    doc.append(
        "## Records used\n\n"
        + "\n".join(f"- {link(p, base, os.path.relpath(p, base))}" for p in used)
        if used
        else ""
    )
    if plot_notes:
        doc.append("\n".join(sorted(set(plot_notes))))
    results_md = "\n\n".join(part for part in doc if part).rstrip() + "\n"
    section = readme_section(selected, off_policy, out_md, readme, len(invalid))
    summary = summary_text(selected)
    return Report(results_md, section, summary, invalid, stale_notes, found.ignored)
