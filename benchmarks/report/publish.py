"""`report --publish`'s copy of a run's records into benchmarks/results/: everything is checked
first, and a run with any invalid record, torn run-log line, smoke record or record that measured
nothing publishes nothing; nor does one whose records would show less than the published ones
they replace (fewer cases, baselines or modes, or a busier machine) unless `replace` is given,
and then the replaced records are kept under benchmarks/results/history/."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from benchmarks.harness.paths import HISTORY, MANIFEST
from benchmarks.report import coverage
from benchmarks.report.records import (
    GPU_SUMMARIES,
    Checks,
    Record,
    load_manifest,
    load_records,
)


class PublishError(Exception):
    """A run that must not be published, found before any file is written."""


@dataclasses.dataclass
class Plan:
    """What publishing one run folder would write: (source, destination) pairs, the run log's
    lines to append, and the files left out with why."""

    copies: list[tuple[Path, Path]]
    manifest: bytes
    left_out: list[tuple[Path, str]]
    records: list[Record]  # the run's records, each at the path it is published to


@dataclasses.dataclass
class Replaced:
    """A published record that publishing would no longer show (or would overwrite), the record
    shown in its place (None: none), and what that loses."""

    old: Record
    new: Record | None
    lost: list[str]

    def describe(self, published: Path) -> str:
        name = self.old.path.relative_to(published)
        instead = f"by {self.new.path.relative_to(published)}" if self.new else "by nothing"
        return f"{name} would be replaced {instead}, which loses: {'; '.join(self.lost)}"


def plan(run_dir: Path, published: Path, checks: Checks) -> Plan:
    """Checks every file of `run_dir` and says what publishing it would write; PublishError,
    naming each problem, if anything must not be published. A front-door run (it has a run log)
    goes in flat, any other folder (a benchmarks/gpu_check.sh OUT_DIR) as a subfolder of its
    name. Only the report's records, the plots their suites drew beside them and the GPU
    check's summaries are copied; any other file is left out (and named)."""
    found = load_records([run_dir], checks)
    manifest = run_dir / MANIFEST
    # Run logs of front-door runs inside the folder (gpu_check.sh's throughput/) travel too.
    logs = sorted(p for p in run_dir.rglob(MANIFEST) if p != manifest)
    _, torn = load_manifest([run_dir, *(p.parent for p in logs)])
    problems = [bad.describe() for bad in found.invalid + torn]
    smoke = [r.path.name for r in found.records if r.mode == "smoke"]
    if smoke:
        problems.append(f"smoke records {smoke}: they check the pipeline, they are not results")
    for r in found.records:
        if coverage.measured(r.data) == frozenset():
            problems.append(
                f"{r.path}: measured nothing (every case skipped, failed or timed out): "
                "a record with no measured case is not a result"
            )
    summaries = sorted(p for name in GPU_SUMMARIES for p in run_dir.rglob(name))
    for path in summaries:
        try:
            json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            problems.append(f"{path}: GPU check summary unreadable: {e}")
    if problems:
        lines = "\n  ".join(problems)
        raise PublishError(f"{run_dir} not published, nothing was copied:\n  {lines}")
    dest = published if manifest.is_file() else published / run_dir.name
    stems = [r.path.with_suffix("") for r in found.records]
    plots = [
        p
        for p in sorted(run_dir.rglob("*.png"))
        if not p.name.startswith("report_") and any(_drawn_for(p, s) for s in stems)
    ]
    sources = sorted([r.path for r in found.records] + plots + summaries + logs)
    left_out = [(p, why) for p, why in found.ignored if p != manifest]
    for p in sorted(run_dir.rglob("*.png")):
        if p not in plots:
            left_out.append((p, "a plot of no published record (the report draws its own)"))
    left_out += [(p, "the run's own report") for p in sorted(run_dir.rglob("RESULTS.md"))]
    new = manifest.read_bytes() if manifest.is_file() else b""
    if new and not new.endswith(b"\n"):
        new += b"\n"
    copies = [(p, dest / p.relative_to(run_dir)) for p in sources]
    records = [Record(dest / r.path.relative_to(run_dir), r.data) for r in found.records]
    return Plan(copies, new, sorted(left_out), records)


def _drawn_for(png: Path, stem: Path) -> bool:
    """A suite's plot beside its record: `<record stem>.png` or `<record stem>_<what>.png`."""
    return png.parent == stem.parent and (
        png.stem == stem.name or png.stem.startswith(f"{stem.name}_")
    )


def replaced(
    incoming: list[Record],
    published: Path,
    checks: Checks,
    scopes: Mapping[str, Callable[[dict[str, Any]], str]],
) -> list[Replaced]:
    """The published records that `incoming` (records at the paths they would be published to)
    would replace with less: each record the report shows now that it would show no longer,
    and each file they overwrite, with what its replacement loses
    (`coverage.losses`); republishing the same record loses nothing."""
    order = list(checks)
    before = {r.path: r for r in load_records([published], checks).records}
    after = {**before, **{r.path: r for r in incoming}}
    now, then = (coverage.shown(x.values(), order, scopes) for x in (before, after))
    pairs = [(old, then.get(key)) for key, old in now.items()]
    pairs += [(before[r.path], r) for r in incoming if r.path in before]
    found, seen = [], set()
    for old, new in pairs:
        pair = (old.path, new.path if new else None)
        if (new is not None and new.data == old.data) or pair in seen:
            continue
        seen.add(pair)
        lost = coverage.losses(old, new) if new else ["every figure of it: no record shown"]
        if lost:
            found.append(Replaced(old, new, lost))
    return found


def history_path(record: Record, published: Path) -> Path:
    """Where a replaced record is kept: history/<its stem>_<its UTC time>_<its commit>.json."""
    stamp = "".join(c for c in record.utc[:19] if c.isalnum()) or "undated"
    commit = str(record.prov.get("commit") or "unknown")[:7]
    folder = published / HISTORY / record.path.parent.relative_to(published)
    path = folder / f"{record.path.stem}_{stamp}_{commit}.json"
    i = 1
    while path.exists() and path.read_bytes() != record.path.read_bytes():
        i += 1
        path = folder / f"{record.path.stem}_{stamp}_{commit}_{i}.json"
    return path


def publish(
    run_dirs: list[Path],
    published: Path,
    checks: Checks,
    scopes: Mapping[str, Callable[[dict[str, Any]], str]] | None = None,
    replace: bool = False,
) -> list[Path]:
    """Publishes `run_dirs` into `published` once every one of them has been checked (file by
    file, atomically; the run logs' lines appended to the published one); returns the files
    written. PublishError, before anything is written, if any run must not be published, or if
    its records would show less than the published ones they replace (`replaced`: fewer cases,
    baselines or modes, or a busier machine) and not `replace`; with `replace`, each published
    file so overwritten is first kept under history/ (`history_path`)."""
    from atomicfiles import atomic_write  # imports jax: only when a file is written

    plans = [(d, plan(d, published, checks)) for d in run_dirs]
    worse = replaced([r for _, p in plans for r in p.records], published, checks, scopes or {})
    if worse and not replace:
        lines = "\n  ".join(w.describe(published) for w in worse)
        raise PublishError(
            f"{', '.join(map(str, run_dirs))} not published, nothing was copied: it would "
            f"replace published records with less:\n  {lines}\npass --replace to publish it "
            f"anyway (each overwritten record is kept under {published / HISTORY}/)"
        )
    written = []
    overwritten = {dst for _, p in plans for _, dst in p.copies}
    for w in worse:
        if w.old.path in overwritten:
            kept = history_path(w.old, published)
            written.append(atomic_write(kept, w.old.path.read_bytes()))
            print(f"replaced: {w.describe(published)}; the old record kept as {kept}")
        else:
            print(f"replaced: {w.describe(published)}; the old record stays, no longer shown")
    for run_dir, p in plans:
        for path, why in p.left_out:
            print(f"not published: {path}: {why}")
        for src, dst in p.copies:
            written.append(atomic_write(dst, src.read_bytes()))
        log = published / MANIFEST
        old = log.read_bytes() if log.exists() else b""
        # A run published again (a record re-rendered, say) must not log its lines twice.
        known = set(old.splitlines())
        new = [line for line in p.manifest.splitlines() if line not in known]
        if new:
            if old and not old.endswith(b"\n"):
                old += b"\n"
            written.append(atomic_write(log, old + b"".join(line + b"\n" for line in new)))
        print(f"published {len(p.copies)} file(s) from {run_dir} into {published}")
    return written
