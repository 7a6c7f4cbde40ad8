"""ProfileReport: the per-phase breakdown of a profiled callable or block, as a table and JSON."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from atomicfiles import finite_json
from jaxsim.profiler._hlo import UNSCOPED
from jaxsim.profiler._trace import COMPILE, DISPATCH, IDLE, PYTHON

# How far the overhead-corrected time may miss the held-out uninstrumented time (calls or runs
# the correction did not see) before the table warns that its figures are no better than that.
CORRECTION_ERROR_BOUND = 0.05

_DESCRIPTIONS = {
    UNSCOPED: "device ops outside every known phase",
    DISPATCH: "host inside jax dispatch, device idle",
    COMPILE: "host tracing/lowering/compiling, device idle",
    PYTHON: "host running other Python, device idle",
    IDLE: "host waiting, no executable running",
}


@dataclasses.dataclass
class Row:
    """One line of the breakdown. Times are seconds (per iteration for a profiled callable, in
    all for a profiled block of code), overhead-corrected."""

    name: str
    kind: str  # "phase", "device" ((unscoped)) or "host" ((dispatch), (compile), ...)
    device_s: float  # some op of this phase running
    host_s: float  # host inside an annotation named after this phase (or a host row)
    raw_device_s: float  # as traced, before overhead correction
    raw_host_s: float
    events: float  # traced op events attributed to this row
    parent: str | None = None  # the phase this one is nested in, if any
    idle_s: float = 0.0  # device idle between this phase's kernels inside a running executable
    raw_idle_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.device_s + self.host_s + self.idle_s


@dataclasses.dataclass
class ProfileReport:
    """Where the time of a profiled callable's iteration, or of a profiled block, goes.

    `rows` partition the wall time (`wall_s`): per phase, device time (each op goes to the
    innermost known phase of its `jax.named_scope` path), device idle time between its kernels
    and host time in annotations named after it; then the host's time with the device idle
    (dispatch, compile, other Python, waiting). `mode` is "callable" (`profile(fn)`: seconds per
    iteration, `wall_s` the typical uninstrumented time) or "program" (`with profile():`:
    seconds over the whole block, `wall_s` the overhead-corrected traced time).
    """

    name: str
    phases: list[str]
    iterations: int
    backend: str
    device_kind: str
    wall_s: float
    wall_samples_s: list[float]  # uninstrumented seconds per call ("callable" mode), in order
    traced_wall_s: float  # seconds under the profiler, before correction
    rows: list[Row]
    dispatches_per_iteration: float  # executable launches per iteration (or per marked step)
    executables: dict[str, float]  # module -> launches per iteration (in all: "program")
    op_events_per_iteration: float
    overhead: dict[str, Any]
    coverage: dict[str, float]
    estimated_fraction: float  # of device time, split between phases by the cost model
    unscoped_paths: dict[str, float]  # scope path -> seconds (raw), largest first
    mode: str = "callable"
    compile: dict[str, Any] = dataclasses.field(default_factory=dict)  # seconds, count, events
    dispatches: float = 0.0  # launches in all ("program" mode)
    baseline: dict[str, Any] = dataclasses.field(default_factory=dict)
    gpu: dict[str, Any] = dataclasses.field(default_factory=dict)
    files: dict[str, str] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)

    # ---------------------------------------------------------------------------------- access
    def row(self, name: str) -> Row:
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(f"ProfileReport: no row {name!r}; rows are {[r.name for r in self.rows]}")

    def totals(self) -> dict[str, float]:
        """row name -> seconds (device + idle + host), summing to `wall_s`."""
        return {r.name: r.total_s for r in self.rows}

    def shares(self) -> dict[str, float]:
        """row name -> fraction of the wall time."""
        return {r.name: r.total_s / self.wall_s if self.wall_s > 0 else 0.0 for r in self.rows}

    def device_shares(self) -> dict[str, float]:
        """device row -> fraction of device-busy time (phases and (unscoped) only)."""
        busy = sum(r.device_s for r in self.rows)
        return {r.name: r.device_s / busy if busy > 0 else 0.0 for r in self.rows if r.device_s}

    def by_resource(self) -> dict[str, dict[str, float]]:
        """row name -> {"device": s, "device idle": s, "host": s}, rows with time only."""
        out = {}
        for r in self.rows:
            parts = {"device": r.device_s, "device idle": r.idle_s, "host": r.host_s}
            if r.total_s > 0:
                out[r.name] = parts
        return out

    @property
    def compile_s(self) -> float:
        """Seconds jax spent compiling (tracing, lowering, backend compile) while profiling."""
        return float(self.compile.get("seconds", 0.0))

    @property
    def device_busy_fraction(self) -> float:
        """Fraction of the wall time with some op running on the device."""
        return sum(r.device_s for r in self.rows) / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def correction_warning(self) -> str | None:
        """The warning the table opens with when the overhead-corrected time misses the held-out
        uninstrumented time by more than CORRECTION_ERROR_BOUND; None within it or unchecked."""
        err = self.overhead.get("corrected_error")
        if err is None or (math.isfinite(err) and abs(err) <= CORRECTION_ERROR_BOUND):
            return None
        return (
            f"WARNING: the overhead-corrected time misses the held-out uninstrumented time by "
            f"{100 * err:+.1f}%, beyond the +-{100 * CORRECTION_ERROR_BOUND:.0f}% bound: the "
            "times and shares below are no better than that (a busy machine, or too few calls "
            "or runs: raise repeats/min_time, or the baseline runs)"
        )

    @property
    def device_idle_s(self) -> float:
        """Wall time with no op running: between kernels and with the host busy or waiting."""
        return self.wall_s - sum(r.device_s for r in self.rows)

    # ------------------------------------------------------------------------------ conversion
    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for row, r in zip(d["rows"], self.rows, strict=True):
            row["total_s"] = r.total_s
            row["share"] = r.total_s / self.wall_s if self.wall_s > 0 else 0.0
        d["device_busy_fraction"] = self.device_busy_fraction
        d["compile_s"] = self.compile_s
        d["correction_warning"] = self.correction_warning
        return finite_json(d)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProfileReport:
        known = {f.name for f in dataclasses.fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        row_fields = {f.name for f in dataclasses.fields(Row)}
        d["rows"] = [Row(**{k: v for k, v in r.items() if k in row_fields}) for r in d["rows"]]
        return cls(**d)

    @classmethod
    def load(cls, path: str | Path) -> ProfileReport:
        return cls.from_dict(json.loads(Path(path).read_text()))

    # -------------------------------------------------------------------------------- printing
    def format_table(self) -> str:
        if self.mode == "program":
            header = (
                f"jaxsim.profile {self.name}: {_s(self.wall_s)} s in all (overhead-corrected; "
                f"{_s(self.traced_wall_s)} s traced), compile {_s(self.compile_s)} s, "
                f"{self.backend} ({self.device_kind})"
            )
        else:
            header = (
                f"jaxsim.profile {self.name}: {_ms(self.wall_s)} ms per iteration uninstrumented "
                f"(10th percentile of {len(self.wall_samples_s)} calls), {self.iterations} traced "
                f"iterations, {self.backend} ({self.device_kind})"
            )
        unit, f = ("s", _s) if self.mode == "program" else ("ms", _ms)
        warning = self.correction_warning
        lines = [header, *([warning] if warning else []), ""]
        width = max([len(r.name) + 2 * _depth(r, self.rows) for r in self.rows] + [12])
        cols = f"{'device ' + unit:>10}  {'idle ' + unit:>10}  {'host ' + unit:>10}"
        lines.append(f"{'phase':<{width}}  {cols}  {'share':>7}  note")
        rule = "-" * (width + 57)
        lines.append(rule)
        for r in _ordered(self.rows):
            if r.total_s == 0 and r.events == 0 and r.kind == "phase":
                continue
            label = "  " * _depth(r, self.rows) + r.name
            share = 100 * r.total_s / self.wall_s if self.wall_s > 0 else 0.0
            note = _DESCRIPTIONS.get(r.name, "")
            incl = _inclusive(r, self.rows)
            if incl > r.total_s * 1.0001:
                note = f"{f(incl)} {unit} with nested phases"
            lines.append(
                f"{label:<{width}}  {f(r.device_s, r.raw_device_s):>10}  "
                f"{f(r.idle_s, r.raw_idle_s):>10}  {f(r.host_s, r.raw_host_s):>10}  "
                f"{share:6.1f}%  {note}"
            )
        lines.append(rule)
        dev = sum(r.device_s for r in self.rows)
        idle = sum(r.idle_s for r in self.rows)
        lines.append(
            f"{'total':<{width}}  {f(dev):>10}  {f(idle):>10}  "
            f"{f(self.wall_s - dev - idle):>10}  {100.0:6.1f}%"
        )
        lines += ["", self._dispatch_line()]
        lines.append(
            f"device busy: {100 * self.device_busy_fraction:.1f}% of wall time (idle "
            f"{f(self.device_idle_s)} {unit}); kernel time split between phases by the cost "
            f"model: {100 * self.estimated_fraction:.1f}%"
        )
        c = self.compile
        if c:
            lines.append(
                f"compile: {_s(self.compile_s)} s in {c.get('backend_compiles', 0)} backend "
                "compile(s), apart from the run time above"
                if self.mode == "callable"
                else f"compile: {_s(self.compile_s)} s in {c.get('backend_compiles', 0)} backend "
                "compile(s) (jax.monitoring; the (compile) row is its traced share)"
            )
        lines += self._overhead_lines()
        if self.unscoped_paths:
            top = next(iter(self.unscoped_paths))
            lines.append(f"largest unscoped scope: {top}")
        if self.gpu:
            lines.append("gpu: " + ", ".join(f"{k}={v}" for k, v in self.gpu.items()))
        lines += [f"note: {n}" for n in self.notes]
        lines += [f"{k}: {v}" for k, v in self.files.items()]
        return "\n".join(lines)

    def _dispatch_line(self) -> str:
        top = list(self.executables.items())[:4]
        detail = ", ".join(f"{m} x{n:.3g}" for m, n in top)
        if len(self.executables) > 4:
            detail += ", ..."
        detail = f" ({detail})" if detail else ""
        if self.mode == "program":
            per = (
                f", {self.dispatches_per_iteration:.3g} per marked step ({self.iterations} steps)"
                if self.iterations
                else ""
            )
            return f"dispatches: {self.dispatches:.0f} in all{per}{detail}"
        return f"dispatches per iteration: {self.dispatches_per_iteration:.3g}{detail}"

    def _overhead_lines(self) -> list[str]:
        o = self.overhead
        unit, f = ("s", _s) if self.mode == "program" else ("ms", _ms)
        model = (
            f"trace overhead: {self.op_events_per_iteration:.0f} op events at "
            f"{1e6 * (o.get('op_event_s') or 0):.2f} us, host events at "
            f"{1e6 * (o.get('host_event_s') or 0):.2f} us (probes)"
        )
        lines = []
        if o.get("measured_s") is not None:
            lines.append(
                f"{model}: {f(o.get('model_s') or 0)} {unit}; measured on this program (traced "
                f"minus uninstrumented): {f(o['measured_s'])} {unit}, of which "
                f"{f(o.get('placed_s') or 0)} placed by the model, {f(o.get('spread_s') or 0)} "
                "taken from all rows in proportion"
            )
        else:
            lines.append(f"{model}: {f(o.get('model_s') or 0)} {unit}")
        err = o.get("corrected_error")
        if err is not None:
            lines.append(
                f"overhead correction: traced {f(o.get('traced_s', 0))} -> corrected "
                f"{f(o.get('corrected_s', 0))} {unit} vs {f(o.get('validation_s') or 0)} {unit} "
                f"held-out uninstrumented: error {100 * err:+.1f}% (probe model alone: "
                f"{100 * (o.get('model_error') or 0):+.1f}%)"
            )
        else:
            lines.append(
                f"overhead correction: traced {f(o.get('traced_s', 0))} -> corrected "
                f"{f(o.get('corrected_s', 0))} {unit} (probe model; no uninstrumented run to "
                "check it against)"
            )
        b = self.baseline
        if b:
            checked = (
                f"error {100 * b['error']:+.1f}% against {b['validation_runs']} run(s) it did "
                "not see"
                if b.get("error") is not None
                else "calibrated on it"
            )
            lines.append(
                f"baseline ({len(b['runs'])} uninstrumented run(s)): {_s(b['run_s'])} s run + "
                f"{_s(b['compile_s'])} s compile; corrected run time here "
                f"{_s(b['profiled_run_s'])} s, {checked}; probe model alone "
                f"{100 * (b.get('model_error') or 0):+.1f}%, uncorrected "
                f"{100 * (b.get('uncorrected_error') or 0):+.1f}%"
            )
        return lines


def _ms(x: float, raw: float | None = None) -> str:
    if raw is not None and x == 0 and raw == 0:
        return "-"
    return f"{1e3 * x:.3f}" if abs(x) < 1e-2 else f"{1e3 * x:.2f}"


def _s(x: float, raw: float | None = None) -> str:
    if raw is not None and x == 0 and raw == 0:
        return "-"
    return f"{x:.4f}" if abs(x) < 1 else f"{x:.3f}"


def _depth(row: Row, rows: list[Row]) -> int:
    by_name = {r.name: r for r in rows}
    depth, seen, cur = 0, {row.name}, row
    while cur.parent in by_name and cur.parent not in seen:
        seen.add(cur.parent)
        cur = by_name[cur.parent]
        depth += 1
    return depth


def _inclusive(row: Row, rows: list[Row]) -> float:
    return row.total_s + sum(
        _inclusive(r, rows) for r in rows if r.parent == row.name and r.name != row.name
    )


def _ordered(rows: list[Row]) -> list[Row]:
    names = {r.name for r in rows}
    out: list[Row] = []

    def visit(r: Row, seen: set[str]):
        out.append(r)
        for child in rows:
            if child.parent == r.name and child.name not in seen:
                visit(child, seen | {child.name})

    for r in rows:
        if r.parent not in names:
            visit(r, {r.name})
    out += [r for r in rows if r not in out]  # rows in a parent cycle
    return out
