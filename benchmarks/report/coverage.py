"""What a record measured, and what publishing a record in place of another would lose."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from benchmarks.report.records import Record, select

# A case holding one of these keys was not measured (the peers suite's cases).
NOT_MEASURED = ("skipped", "failed", "timed_out")
# The fields that name a point of a "results" or "rows" list, most general first.
_LABEL_KEYS = (
    "family",
    "game",
    "algorithm",
    "impl",
    "case",
    "backend",
    "env_id",
    "env",
    "name",
    "policy",
    "outputs",
    "num_envs",
    "num_particles",
    "block_envs",
    "k",
    "devices",
)
# The 1-minute load average a new record may exceed the published one's by: an idle machine's
# noise. Beyond it the new figures were measured on a busier machine than the ones they replace.
LOAD_MARGIN = 0.5
_MODE_RANK = {"full": 0, "quick": 1, "smoke": 2}


def _label(point: dict[str, Any], i: int) -> str:
    label = " ".join(f"{k}={point[k]}" for k in _LABEL_KEYS if point.get(k) is not None)
    return label or f"row {i}"


def measured(data: dict[str, Any]) -> frozenset[str] | None:
    """The cases `data` (a record) measured: its "cases" that were neither skipped, failed nor
    timed out, or the points of its "results" (or "rows") whose status is ok (a fusion
    `--check-only` record, with no points, measured its "checks"). None where the record's
    shape does not say (no "cases", "results" or "rows")."""
    cases = data.get("cases")
    if isinstance(cases, dict):
        return frozenset(
            name
            for name, case in cases.items()
            if isinstance(case, dict) and not any(k in case for k in NOT_MEASURED)
        )
    for key in ("results", "rows"):
        points = data.get(key)
        if not isinstance(points, list):
            continue
        checks = data.get("checks")
        if not points and isinstance(checks, dict):
            return frozenset(f"check {name}" for name in checks)
        return frozenset(
            _label(p, i)
            for i, p in enumerate(points)
            if isinstance(p, dict) and p.get("status", "ok") == "ok"
        )
    return None


def baselines(data: dict[str, Any]) -> frozenset[str]:
    """The implementations (`impl`) a record measured at least one point of."""
    points = data.get("results")
    if not isinstance(points, list):
        return frozenset()
    return frozenset(
        p["impl"]
        for p in points
        if isinstance(p, dict) and p.get("status", "ok") == "ok" and isinstance(p.get("impl"), str)
    )


def load_1min(data: dict[str, Any]) -> float | None:
    """The 1-minute load average when the record's measuring started, from its provenance."""
    load = (data.get("provenance") or {}).get("loadavg_1_5_15min")
    if isinstance(load, list) and load and isinstance(load[0], int | float):
        return float(load[0])
    return None


def _names(items: Iterable[str], limit: int = 6) -> str:
    items = sorted(items)
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def losses(old: Record, new: Record) -> list[str]:
    """What showing `new` in place of `old` (the same suite on the same machine) loses: the
    baselines, cases and mode `old` measured that `new` does not, and a quieter machine."""
    found = []
    if _MODE_RANK.get(new.mode, 0) > _MODE_RANK.get(old.mode, 0):
        found.append(f"mode {old.mode} (a {new.mode} record would be shown in its place)")
    before, after = measured(old.data), measured(new.data)
    if before is not None and after is not None:
        gone = baselines(old.data) - baselines(new.data)
        if gone:
            found.append(f"baseline(s) {_names(gone)}")
        cases = {c for c in before - after if not any(f"impl={b} " in f"{c} " for b in gone)}
        if cases:
            found.append(f"{len(cases)} case(s): {_names(cases)}")
    load_old, load_new = load_1min(old.data), load_1min(new.data)
    if load_old is not None and load_new is not None and load_new > load_old + LOAD_MARGIN:
        found.append(
            f"a quieter machine: measured at load {load_new:g}, the published one at "
            f"{load_old:g} (1-minute load average; margin {LOAD_MARGIN:g})"
        )
    return found


Key = tuple[str, str, str]


def shown(
    records: Iterable[Record],
    order: list[str],
    scopes: Mapping[str, Callable[[dict[str, Any]], str]],
) -> dict[Key, Record]:
    """(benchmark, device, scope) -> the record the report shows for it (`records.select`)."""
    chosen = select(list(records), order, None, scopes)
    return {
        (r.benchmark, r.device, scopes[r.benchmark](r.data) if r.benchmark in scopes else ""): r
        for r in chosen
    }
