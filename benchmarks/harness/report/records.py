"""The JSON records the results report reads: loading, checking, and choosing one per machine."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness.paths import MANIFEST
from benchmarks.harness.report.validation import record_problems

BENCHMARKS = (
    "rollout_throughput",
    "fusion",
    "fusion_sizes",
    "ppo",
    "breakdown",
    "offpolicy",
    "offpolicy_solve",
    "adapters",
    "scaling",
)
MODE_ORDER = ("full", "quick", "smoke")
OFF_POLICY_REASON = "no offpolicy record (python -m benchmarks.offpolicy writes one)"
OFF_POLICY_TIME_TO_SOLVE = (
    "Off-policy (DQN, SAC) time-to-solve beside Stable-Baselines3: not measured (no "
    "offpolicy_solve record: `python -m benchmarks.offpolicy_solve` writes one; the learning "
    "results of `agents.train dqn|sac` are in agents/README.md)."
)


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


def _benchmark_from_name(path: Path) -> str | None:
    # The longest name that fits: "offpolicy_solve_x.json" is not an offpolicy record.
    return max((b for b in BENCHMARKS if path.name.startswith(f"{b}_")), key=len, default=None)


def _invalid(path: Path, reason: str, data: Any = None) -> InvalidRecord:
    benchmark = _benchmark_from_name(path)
    if not isinstance(data, dict):
        return InvalidRecord(path, reason, benchmark, _mode_from_name(path))
    if data.get("benchmark") in BENCHMARKS:
        benchmark = data["benchmark"]
    if not isinstance(data.get("provenance"), dict):
        return InvalidRecord(path, reason, benchmark, _mode_from_name(path))
    view = Record(path, data)
    return InvalidRecord(path, reason, benchmark, view.mode, view.device, view.utc or None)


def load_records(dirs: Iterable[Path]) -> tuple[list[Record], list[InvalidRecord]]:
    """Every suite record under `dirs`, and every file that should be one but is not usable.

    A JSON file that does not parse is invalid whatever its name; one that parses is a record
    if its "benchmark" is one this report covers (or, lacking the field, if its name starts with
    one), and invalid if `record_problems` finds anything wrong with it. Other JSON files (the
    GPU check's summaries, other suites' records) are not records and are left alone.
    """
    records, invalid = [], []
    for d in dirs:
        for path in sorted(Path(d).rglob("*.json")):
            if path.name.startswith("."):
                continue
            try:
                data = json.loads(path.read_text())
            except (OSError, UnicodeDecodeError) as e:
                invalid.append(_invalid(path, f"unreadable: {e}"))
                continue
            except json.JSONDecodeError as e:
                invalid.append(_invalid(path, f"not valid JSON (truncated?): {e}"))
                continue
            if not isinstance(data, dict):
                if _benchmark_from_name(path):
                    invalid.append(_invalid(path, "not a JSON object"))
                continue
            if "benchmark" not in data and _benchmark_from_name(path) is None:
                continue
            if "benchmark" in data and data["benchmark"] not in BENCHMARKS:
                continue
            problems = record_problems(data)
            if problems:
                invalid.append(_invalid(path, "; ".join(problems), data))
            else:
                records.append(Record(path, data))
    return records, invalid


def _has_points(r: Record) -> bool:
    """A fusion record from `--check-only` holds checks but no timed points."""
    return r.benchmark != "fusion" or bool(r.data.get("results"))


def _preference(mode: str | None, utc: str, path: Path) -> tuple:
    """Sorts the record to show first: not smoke, then newest, then by path."""
    return (mode == "smoke", tuple(-ord(c) for c in utc), str(path))


def select(records: Sequence[Record], mode: str | None = None) -> list[Record]:
    """For each (benchmark, device): the newest record of `mode`; by default the newest full or
    quick one (a smoke record only where there is nothing else).

    Returns them ordered by benchmark, CPU before GPU.
    """
    groups: dict[tuple[str, str], list[Record]] = {}
    for r in records:
        if _has_points(r) and (mode is None or r.mode == mode):
            groups.setdefault((r.benchmark, r.device), []).append(r)
    chosen = [
        min(group, key=lambda r: _preference(r.mode, r.utc, r.path)) for group in groups.values()
    ]
    return sorted(chosen, key=lambda r: (BENCHMARKS.index(r.benchmark), r.is_gpu, r.device))


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


def off_policy_reason(entries: Sequence[dict[str, Any]]) -> str:
    """Why the off-policy comparison is missing: the reason the latest run that reached the
    offpolicy suite skipped it (an older skip does not outlive a later run), else the default."""
    latest = next((e for e in reversed(entries) if e.get("suite") == "offpolicy"), {})
    if latest.get("status") == "skipped" and latest.get("reason"):
        return latest["reason"]
    return OFF_POLICY_REASON
