"""Finishing a suite's record: written atomically, its table printed, failures in the exit
status; and the crash-safe JSON-lines files (partial results, the run log)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness.commands import portable_record
from benchmarks.harness.paths import RUNS_DIR


def default_out(stem: str, quick: bool = False, tag: str | None = None) -> Path:
    """runs/bench/<stem>_<machine tag>[_quick].json: where a suite run on its own writes."""
    from benchmarks.harness.provenance import machine_tag  # imports jax

    return RUNS_DIR / f"{stem}_{tag or machine_tag()}{'_quick' if quick else ''}.json"


def finish(
    record: dict[str, Any],
    out: Path,
    table: str | None = None,
    failures: Sequence[Any] = (),
    partial: Path | None = None,
    beside: Path | None = None,
) -> int:
    """Writes `record` to `out` atomically (NaN and infinities as null, every machine path made
    portable: `commands.portable_record`), removes the `partial` results file it replaces,
    prints `table` and where the record (and the file `beside` it, a plot) went; returns the
    exit status: 1 (after naming them) if there are `failures`, else 0. Without a `table`, the
    record's own section of the results report (`registry.section_of`): a suite's figures are
    drawn one way, in a terminal and in RESULTS.md alike."""
    from atomicfiles import finite_json, write_json_atomic  # imports jax

    write_json_atomic(out, finite_json(portable_record(record)))
    if table is None:
        from benchmarks.harness.registry import section_of  # every suite's section: lazily

        table = section_of(out)
    if partial is not None:
        partial.unlink(missing_ok=True)
    if table:
        print()
        print(table)
    took = f" ({record['wall_s']} s)" if record.get("wall_s") is not None else ""
    print(f"\nwrote {out}" + (f" and {beside}" if beside else "") + took)
    if failures:
        print(f"FAILED: {', '.join(map(str, failures))}")
        return 1
    return 0


def append_jsonl(path: str | os.PathLike, record: Any) -> None:
    """Appends `record` as one JSON line, flushed and fsynced, so finished records survive a crash.

    The line is serialised (its machine paths made portable) before the file is opened: a record
    that fails to serialise writes nothing.
    """
    line = json.dumps(portable_record(record), allow_nan=False) + "\n"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def read_jsonl(path: str | os.PathLike) -> list[Any]:
    """The complete records of a JSONL file; a torn last line (from a crash) is dropped."""
    records = []
    for line in Path(path).read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return records
