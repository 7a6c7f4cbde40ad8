"""`report --publish`'s copy of a run's records into benchmarks/results/: everything is checked
first, and a run with any invalid record, torn run-log line or smoke record publishes nothing."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from benchmarks.harness.paths import MANIFEST
from benchmarks.harness.report.records import GPU_SUMMARIES, Checks, load_manifest, load_records


class PublishError(Exception):
    """A run that must not be published, found before any file is written."""


@dataclasses.dataclass
class Plan:
    """What publishing one run folder would write: (source, destination) pairs, the run log's
    lines to append, and the files left out with why."""

    copies: list[tuple[Path, Path]]
    manifest: bytes
    left_out: list[tuple[Path, str]]


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
    return Plan(copies, new, sorted(left_out))


def _drawn_for(png: Path, stem: Path) -> bool:
    """A suite's plot beside its record: `<record stem>.png` or `<record stem>_<what>.png`."""
    return png.parent == stem.parent and (
        png.stem == stem.name or png.stem.startswith(f"{stem.name}_")
    )


def publish(run_dirs: list[Path], published: Path, checks: Checks) -> list[Path]:
    """Publishes `run_dirs` into `published` once every one of them has been checked (file by
    file, atomically; the run logs' lines appended to the published one); returns the files
    written. PublishError, before anything is written, if any run must not be published."""
    from jaxsim.files import atomic_write  # imports jax: only when a file is written

    plans = [(d, plan(d, published, checks)) for d in run_dirs]
    written = []
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
