"""The JSON records the results report reads: loading, checking, and choosing the ones to show."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness.paths import HISTORY, MANIFEST

MODE_ORDER = ("full", "quick", "smoke")
# Files beside the records that the report reads or makes itself: never "ignored".
GPU_SUMMARIES = ("gpu_tests.json", "environment.json")  # benchmarks/gpu_check.sh's
REPORT_FILES = ("RESULTS.md", MANIFEST)
# benchmark -> the problems of one of its records (each naming its field), in report order.
Checks = Mapping[str, Callable[[dict[str, Any]], list[str]]]


@dataclasses.dataclass
class Record:
    """One suite's JSON record and what the report needs to know about it."""

    path: Path
    data: dict[str, Any]

    @property
    def benchmark(self) -> str:
        return self.data["benchmark"]

    @property
    def prov(self) -> dict[str, Any]:
        return self.data.get("provenance") or {}

    @property
    def mode(self) -> str:
        """smoke/quick from the file name the front door gives it, else from the command."""
        return _mode_from_name(self.path) or _mode_from_data(self.data)

    @property
    def is_gpu(self) -> bool:
        return self.prov.get("jax_backend") not in (None, "cpu")

    @property
    def device(self) -> str:
        """ "cpu (AMD EPYC, 2 cores)" or the accelerator's kind, e.g. "NVIDIA H200"."""
        p = self.prov
        if self.is_gpu:
            return f"{p.get('device_kind')} ({p.get('num_devices', 1)} device(s))"
        return f"cpu ({p.get('cpu_model', '?')}, {p.get('cpu_count', '?')} cores)"

    @property
    def utc(self) -> str:
        return self.prov.get("utc_time") or ""


@dataclasses.dataclass
class InvalidRecord:
    """A file the report cannot use, and why; `benchmark`, `device` and `utc` are None where
    the file does not say (a truncated record: the benchmark is then read off its name)."""

    path: Path
    reason: str
    benchmark: str | None = None
    mode: str | None = None
    device: str | None = None
    utc: str | None = None

    def describe(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclasses.dataclass
class Found:
    """What a search of record folders found: the usable records, the files that should be
    records but are not usable, and every other file the report does not use, with why."""

    records: list[Record]
    invalid: list[InvalidRecord]
    ignored: list[tuple[Path, str]]


def _mode_from_name(path: Path) -> str | None:
    for mode in ("smoke", "quick"):
        if path.stem.endswith(f"_{mode}"):
            return mode
    return None


def _mode_from_data(data: dict[str, Any]) -> str:
    prov = data.get("provenance") or {}
    quick = data.get("quick") or (data.get("config") or {}).get("quick")
    if quick or "--quick" in (prov.get("command") or "").split():
        return "quick"
    return "full"


def _benchmark_from_name(path: Path, benchmarks: Iterable[str]) -> str | None:
    # The longest name that fits: "offpolicy_solve_x.json" is not an offpolicy record.
    return max((b for b in benchmarks if path.name.startswith(f"{b}_")), key=len, default=None)


def _invalid(path: Path, reason: str, checks: Checks, data: Any = None) -> InvalidRecord:
    benchmark = _benchmark_from_name(path, checks)
    if not isinstance(data, dict):
        return InvalidRecord(path, reason, benchmark, _mode_from_name(path))
    if data.get("benchmark") in checks:
        benchmark = data["benchmark"]
    if not isinstance(data.get("provenance"), dict):
        return InvalidRecord(path, reason, benchmark, _mode_from_name(path))
    view = Record(path, data)
    return InvalidRecord(path, reason, benchmark, view.mode, view.device, view.utc or None)


def _not_json(path: Path) -> str | None:
    """Why the report passes over a file that is not JSON, or None for one it reads or makes."""
    if path.name in REPORT_FILES or (path.suffix == ".png"):
        return None
    if path.name.endswith(".partial.jsonl"):
        return "partial results of a suite that did not finish"
    return "not a record (records are .json)"


def load_records(dirs: Iterable[Path], checks: Checks) -> Found:
    """Every suite record under `dirs`, every file that should be one but is not usable, and
    every other file, with why the report does not use it.

    A JSON file that does not parse is invalid whatever its name; one that parses is a record
    if its "benchmark" is one of `checks` (or, lacking the field, if its name starts with one),
    and invalid if its check finds anything wrong with it. Other files (another suite's records,
    logs) are not records: they are left alone and named in `Found.ignored`, as are the
    replaced records kept under a `history/` folder.
    """
    found = Found([], [], [])
    for d in dirs:
        for path in sorted(p for p in Path(d).rglob("*") if p.is_file()):
            if HISTORY in path.relative_to(d).parts[:-1]:
                found.ignored.append((path, "a replaced record, kept as history"))
            elif path.name.startswith("."):
                found.ignored.append((path, "a hidden file"))
            elif path.suffix != ".json":
                if (why := _not_json(path)) is not None:
                    found.ignored.append((path, why))
            elif path.name not in GPU_SUMMARIES:
                _load(path, checks, found)
    return found


def _load(path: Path, checks: Checks, found: Found) -> None:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        found.invalid.append(_invalid(path, f"unreadable: {e}", checks))
        return
    except json.JSONDecodeError as e:
        found.invalid.append(_invalid(path, f"not valid JSON (truncated?): {e}", checks))
        return
    named = _benchmark_from_name(path, checks)
    if not isinstance(data, dict):
        if named:
            found.invalid.append(_invalid(path, "not a JSON object", checks))
        else:
            found.ignored.append((path, f"not a record: a JSON {type(data).__name__}"))
        return
    benchmark = data.get("benchmark", named)
    if benchmark is None:
        found.ignored.append((path, "not a record: no 'benchmark' field"))
    elif not isinstance(benchmark, str) or benchmark not in checks:
        found.ignored.append((path, f"a {benchmark!r} record: no suite of the report reads it"))
    elif problems := checks[benchmark](data):
        found.invalid.append(_invalid(path, "; ".join(problems), checks, data))
    else:
        found.records.append(Record(path, data))


def _has_points(r: Record) -> bool:
    """A fusion record from `--check-only` holds checks but no timed points."""
    return r.benchmark != "fusion" or bool(r.data.get("results"))


def _preference(mode: str | None, utc: str, path: Path) -> tuple:
    """Sorts the record to show first: not smoke, then newest, then by path."""
    return (mode == "smoke", tuple(-ord(c) for c in utc), str(path))


def select(
    records: Sequence[Record],
    order: Sequence[str],
    mode: str | None = None,
    scopes: Mapping[str, Callable[[dict[str, Any]], str]] | None = None,
) -> list[Record]:
    """For each (benchmark, device, scope): the newest record of `mode`; by default the newest
    full or quick one (a smoke record only where the machine has nothing else of the benchmark).

    A benchmark's scope (`scopes[benchmark](data)`, "" where it has none) says what a record
    measured that another of the same suite may not have: a sweep over batch sizes and a long run
    at one size are both shown; of two sweeps, the newer. Returns them ordered by benchmark (as in
    `order`), CPU before GPU, then by scope.
    """
    scopes = scopes or {}

    def scope(r: Record) -> str:
        return scopes[r.benchmark](r.data) if r.benchmark in scopes else ""

    machines: dict[tuple[str, str], list[Record]] = {}
    for r in records:
        if _has_points(r) and (mode is None or r.mode == mode):
            machines.setdefault((r.benchmark, r.device), []).append(r)
    chosen = []
    for group in machines.values():
        if any(r.mode != "smoke" for r in group):
            group = [r for r in group if r.mode != "smoke"]
        by_scope: dict[str, list[Record]] = {}
        for r in group:
            by_scope.setdefault(scope(r), []).append(r)
        chosen += [
            min(same, key=lambda r: _preference(r.mode, r.utc, r.path))
            for same in by_scope.values()
        ]
    return sorted(chosen, key=lambda r: (order.index(r.benchmark), r.is_gpu, r.device, scope(r)))


def would_have_been_chosen(bad: InvalidRecord, shown: Record, mode: str | None) -> bool:
    """True if `bad`, were it valid, could have been shown instead of `shown`: same benchmark,
    same machine (or unknown), of the mode asked for, and newer (by its provenance's time, or
    by the file's modification time where it has none)."""
    if bad.benchmark != shown.benchmark or bad.device not in (None, shown.device):
        return False
    if mode is not None and bad.mode not in (None, mode):
        return False
    if bad.utc is not None:
        return _preference(bad.mode, bad.utc, bad.path) < _preference(
            shown.mode, shown.utc, shown.path
        )
    if (bad.mode == "smoke") != (shown.mode == "smoke"):
        return bad.mode != "smoke"
    try:
        return bad.path.stat().st_mtime >= shown.path.stat().st_mtime
    except OSError:
        return True


def load_manifest(dirs: Iterable[Path]) -> tuple[list[dict[str, Any]], list[InvalidRecord]]:
    """The front door's run log (`runs.jsonl`) of each directory, and the lines that are not
    JSON (a torn last line, from an interrupted run, among them): those are reported, not used."""
    entries, invalid = [], []
    for d in dirs:
        path = Path(d) / MANIFEST
        if not path.exists():
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError as e:
                invalid.append(InvalidRecord(path, f"line {i} is not valid JSON (ignored): {e}"))
    return entries, invalid
