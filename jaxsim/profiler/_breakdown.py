"""Traced windows -> overhead-corrected rows: the per-phase breakdown of a ProfileReport."""

from __future__ import annotations

import dataclasses
import os
import statistics
from collections import Counter

from jaxsim.profiler._calibrate import Calibration, typical
from jaxsim.profiler._hlo import UNSCOPED
from jaxsim.profiler._report import CORRECTION_ERROR_BOUND, ProfileReport, Row
from jaxsim.profiler._trace import COMPILE, HOST_KEYS, Key, Window

_COMPILE_KEY = ("host", COMPILE)


def _median(dicts: list[dict]) -> dict:
    """Key-wise median (a missing key counts as 0): one window disturbed by another process
    does not move it."""
    keys = {k for d in dicts for k in d}
    return {k: statistics.median(d.get(k, 0.0) for d in dicts) for k in keys}


def _typical_windows(wins: list[Window]) -> tuple[list[Window], float]:
    """The faster half of the windows, and the typical total (see `_calibrate.typical`).

    The slower half holds the windows other processes delayed; key-wise medians over the
    faster half are steadier than over the few windows nearest the typical total.
    """
    ranked = sorted(wins, key=lambda w: w.wall)
    return ranked[: (len(ranked) + 1) // 2], typical([w.wall for w in wins])


def _mean(dicts: list[dict]) -> dict:
    total: Counter = Counter()
    for d in dicts:
        total.update(d)
    return {k: v / len(dicts) for k, v in total.items()}


@dataclasses.dataclass
class Correction:
    raw: dict[Key, float]  # traced seconds per key (key-wise medians, faster half of windows)
    corrected: dict[Key, float]  # the same with the trace overhead taken out
    model_s: float  # overhead the probes' per-event model places where its events fall
    placed_s: float  # of the overhead taken out, the part placed by the model
    spread_s: float  # the rest (measured beyond the model): taken from all keys in proportion
    scale: float  # the model's share that was applied (< 1 if it exceeds what was measured)

    @property
    def raw_s(self) -> float:
        return sum(self.raw.values())

    @property
    def corrected_s(self) -> float:
        return sum(self.corrected.values())


def correct(wins: list[Window], cal: Calibration, measured_s: float | None = None) -> Correction:
    """Takes the trace overhead out of each key where its events put it.

    The faster half of the windows is used, its total the typical one. Per key, the probes'
    model of the overhead is: in-event cost x op events inside the key's time, after-event cost
    x op events followed by the key, host-event cost x host events in its host segments.
    Without `measured_s` the model's overhead is taken out. With it (the traced minus the
    uninstrumented time of this very program, per window), exactly that much is: the model's
    placement first (scaled down if it exceeds the measurement), and what it does not explain
    (a loaded machine wakes a traced program's threads later, say) from every key in
    proportion to its time.
    """
    wins, total = _typical_windows(wins)
    raw = _median([w.time for w in wins])
    if sum(raw.values()) > 0:  # key-wise medians, rescaled to the typical window
        f = total / sum(raw.values())
        raw = {k: v * f for k, v in raw.items()}
    n_in = _mean([w.in_events for w in wins])
    n_after = _mean([w.after_events for w in wins])
    n_host = _mean([w.host_events for w in wins])
    model = Counter()
    for key, n in n_in.items():
        model[key] += cal.in_event_s * n
    for key, n in n_after.items():
        model[key] += cal.after_event_s * n
    for key, n in n_host.items():
        model[key] += cal.host_s * n
    model_s = sum(model.values())
    target = model_s if measured_s is None else max(measured_s, 0.0)
    target = min(target, sum(raw.values()))
    scale = min(1.0, target / model_s) if model_s > 0 else 0.0
    want = {k: scale * m for k, m in model.items() if k in raw}
    corrected = dict(raw)
    # Where the model puts more overhead in a key than the key's time, the rest comes out of
    # the other keys in proportion to their own modelled overhead.
    for _ in range(3):
        owed = 0.0
        for key, w in want.items():
            take = min(w, corrected[key])
            corrected[key] -= take
            owed += w - take
        room = {k: want[k] for k in want if corrected[k] > 0}
        if owed <= 1e-15 or sum(room.values()) <= 0:
            break
        want = {k: owed * w / sum(room.values()) for k, w in room.items()}
    placed = sum(raw.values()) - sum(corrected.values())
    spread = max(target - placed, 0.0)
    # Compilation runs no traced ops: it takes no share of the unexplained rest.
    left = sum(v for k, v in corrected.items() if k != _COMPILE_KEY)
    if spread > 0 and left > 0:
        f = max(1.0 - spread / left, 0.0)
        corrected = {k: v if k == _COMPILE_KEY else v * f for k, v in corrected.items()}
    return Correction(
        raw=raw,
        corrected=corrected,
        model_s=model_s,
        placed_s=placed,
        spread_s=spread,
        scale=scale,
    )


def make_rows(final: dict, raw: dict, events: dict, phases, parents) -> list[Row]:
    def get(d, kind, name):
        return d.get((kind, name), 0.0)

    rows = []
    for p in (*phases, UNSCOPED):
        rows.append(
            Row(
                name=p,
                kind="phase" if p != UNSCOPED else "device",
                device_s=get(final, "device", p),
                host_s=get(final, "host", p),
                idle_s=get(final, "idle", p),
                raw_device_s=get(raw, "device", p),
                raw_host_s=get(raw, "host", p),
                raw_idle_s=get(raw, "idle", p),
                events=events.get(("device", p), 0.0),
                parent=parents.get(p) if parents.get(p) in phases else None,
            )
        )
    for key in HOST_KEYS:
        rows.append(
            Row(
                name=key,
                kind="host",
                device_s=0.0,
                host_s=get(final, "host", key),
                raw_device_s=0.0,
                raw_host_s=get(raw, "host", key),
                events=0.0,
            )
        )
    return rows


def build_report(
    *,
    mode: str,
    name: str,
    wins: list[Window],
    cal: Calibration,
    phases,
    phase_map,
    notes: list[str],
    measured_overhead_s: float | None = None,
    wall_s: float | None = None,
    validation_s: float | None = None,
    **fields,
) -> ProfileReport:
    """The report of traced windows: corrected rows scaled to `wall_s` when it is known.

    `validation_s` is an uninstrumented time the correction never saw: the corrected total's
    error is measured against it.
    """
    import jax

    corr = correct(wins, cal, measured_overhead_s)
    model_only = correct(wins, cal, None) if measured_overhead_s is not None else corr
    target = corr.corrected_s if wall_s is None else wall_s
    scale = target / corr.corrected_s if corr.corrected_s > 0 else 1.0
    final = {k: v * scale for k, v in corr.corrected.items()}
    n_in = _mean([w.in_events for w in wins])

    def error(x):
        return x / validation_s - 1 if validation_s else None

    device = jax.devices()[0]
    busy = statistics.fmean(w.busy for w in wins)
    estimated = statistics.fmean(w.estimated for w in wins)
    executables = _mean([w.executables for w in wins])
    report = ProfileReport(
        name=name,
        mode=mode,
        phases=list(phases),
        iterations=len(wins),
        backend=jax.default_backend(),
        device_kind=device.device_kind,
        wall_s=target,
        wall_samples_s=list(fields.pop("wall_samples_s", [])),
        traced_wall_s=fields.pop("traced_wall_s", corr.raw_s),
        rows=make_rows(final, corr.raw, n_in, phases, phase_map.parent_of()),
        dispatches_per_iteration=statistics.fmean(w.launches for w in wins),
        executables=dict(sorted(executables.items(), key=lambda kv: -kv[1])),
        op_events_per_iteration=statistics.fmean(w.op_events for w in wins),
        overhead={
            "traced_s": corr.raw_s,
            "model_s": corr.model_s,
            "measured_s": measured_overhead_s,
            "model_scale": corr.scale,
            "placed_s": corr.placed_s,
            "spread_s": corr.spread_s,
            "corrected_s": corr.corrected_s,
            "validation_s": validation_s,
            "corrected_error": error(corr.corrected_s),
            "model_corrected_s": model_only.corrected_s,
            "model_error": error(model_only.corrected_s),
            "rows_scale": scale,
            "loadavg_1min": _loadavg(),
            **cal.to_dict(),
        },
        coverage={
            "attributed_raw_s": statistics.fmean(sum(w.time.values()) for w in wins),
            "trace_window_s": statistics.fmean(w.wall for w in wins),
        },
        estimated_fraction=estimated / busy if busy > 0 else 0.0,
        unscoped_paths=dict(
            sorted(_mean([w.unscoped_paths for w in wins]).items(), key=lambda kv: -kv[1])[:10]
        ),
        notes=notes,
        **fields,
    )
    err = report.overhead["corrected_error"]
    if err is not None and abs(err) > CORRECTION_ERROR_BOUND:
        notes.append(
            f"the overhead-corrected total misses the held-out uninstrumented time by "
            f"{100 * err:+.1f}% (a busy machine, or too few calls: raise repeats/min_time); "
            "rows were scaled to match, shares are less certain"
        )
    return report


def _loadavg() -> float:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return float("nan")
