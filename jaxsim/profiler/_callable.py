"""`profile(fn)`: one call of a callable split into phases, calibrated on the callable itself."""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections import Counter
from pathlib import Path

from jaxsim.profiler import _events, _gpu, _trace
from jaxsim.profiler._breakdown import build_report
from jaxsim.profiler._calibrate import PROBE_MODULES, Probes, calibrate, typical
from jaxsim.profiler._capture import CompileMonitor, capture_hlo
from jaxsim.profiler._hlo import UNSCOPED, PhaseMap
from jaxsim.profiler._session import (
    TraceSession,
    Workspace,
    check_no_trace,
    release_freed_memory,
    write_outputs,
)

_WARM_NAME = "jaxsim.profile.warmup"
_MAX_SAMPLES = 2000  # per block: a very fast callable stops here rather than at min_time
_MAX_ATTRIBUTED = 30  # traced calls read from the trace, at most (unless iterations says more)
_MAX_CALIBRATION = 300  # traced calls only timed, at most (unless calibration says more)
_SETTLE_S = 0.05  # traced calls discarded at the start of each trace session
# Trace events per trace session, about (a session holds one call at least). While a session
# stops, jax holds some 1.3 kB per event it recorded (the events, and the XSpace made of them):
# one session of every traced call of a long-looping callable costs gigabytes.
_SESSION_EVENTS = 200_000


def profile_callable(fn, *, phases, iterations, repeats, calibration, warmup, min_time, out_dir,
                     name, hlo, png, gpu_utilization):  # fmt: skip
    import jax

    ws = Workspace(out_dir)
    try:
        report, trace_dir = _run(
            jax, fn, phases, iterations, repeats, calibration, warmup, min_time, name, hlo, ws
        )
        if gpu_utilization or (gpu_utilization is None and jax.default_backend() == "gpu"):
            report.gpu = gpu_section(lambda: _call(jax, fn, "NVML sampling", 0, name), report)
        if ws.out is not None:
            write_outputs(report, trace_dir, ws, name, png)
        ws.close()
        return report
    except BaseException:
        ws.discard()
        raise


def _call(jax, fn, stage: str, i: int, name: str):
    try:
        return jax.block_until_ready(fn())
    except Exception as e:
        e.add_note(
            f"jaxsim.profile: {name!r} raised during {stage} (call {i}); no output was written"
        )
        raise


def _call_unblocked(fn, stage: str, i: int, name: str):
    try:
        return fn()
    except Exception as e:
        e.add_note(
            f"jaxsim.profile: {name!r} raised during {stage} (call {i}); no output was written"
        )
        raise


class _Sampler:
    """Times calls of fn; a call during which jax compiled is counted, not kept."""

    def __init__(self, jax, fn, name, texts):
        self.jax, self.fn, self.name, self.texts = jax, fn, name, texts
        self.compiled = 0
        self.calls = 0

    def settle(self, call_s: float | None = None) -> list[float]:
        """Discards the first calls after a trace starts, which run slower; their times.

        In a later session (`call_s` known), only as many as fit in _SETTLE_S: none when a call
        takes longer (a long-looping callable's call records the most events): such a session
        starts with a calibration call instead (see `_next_calls`).
        """
        if call_s is None:
            return self.traced(_WARM_NAME, 1, _SETTLE_S, n_max=20)
        return self.traced(_WARM_NAME, 0, _SETTLE_S, n_max=min(20, int(_SETTLE_S / call_s)))

    def events_per_call(self, folder) -> int:
        """Trace events one traced call records, counted in a trace session of its own."""
        session = TraceSession(folder)
        with session:
            _, compiled = self._annotated_call(_WARM_NAME, 0)
            data = session.stop(export=False)
        self.compiled += compiled
        return max(_events.count_events(data), 1)

    def untraced(self, n_min: int, t_min: float) -> list[float]:
        samples: list[float] = []
        t_end = time.perf_counter() + t_min
        while len(samples) < n_min or (time.perf_counter() < t_end and len(samples) < _MAX_SAMPLES):
            n = len(self.texts)
            t0 = time.perf_counter()
            self.jax.block_until_ready(_call_unblocked(self.fn, "timing", self.calls, self.name))
            t = time.perf_counter() - t0
            self.calls += 1
            if len(self.texts) > n:
                self.compiled += 1
                if self.compiled > 4 * n_min:
                    break
            else:
                samples.append(t)
        return samples

    def traced(self, step_name: str, n_min: int, t_min: float, n_max=_MAX_SAMPLES) -> list[float]:
        """Calls under the same annotations as a profiled iteration (inside a trace)."""
        samples: list[float] = []
        t_end = time.perf_counter() + t_min
        i = 0
        while len(samples) < n_min or (time.perf_counter() < t_end and len(samples) < n_max):
            t, compiled = self._annotated_call(step_name, i)
            i += 1
            if compiled:
                self.compiled += 1
                if self.compiled > 4 * n_min:
                    break
            else:
                samples.append(t)
        return samples

    def _annotated_call(self, step_name: str, i: int) -> tuple[float, bool]:
        """One call inside a step annotation: (seconds until its outputs are ready, compiled)."""
        jax = self.jax
        n = len(self.texts)
        t0 = time.perf_counter()
        with jax.profiler.StepTraceAnnotation(step_name, step_num=i):
            result = _call_unblocked(self.fn, "tracing", self.calls, self.name)
            with jax.profiler.TraceAnnotation(_events.WAIT_NAME):
                jax.block_until_ready(result)
        t = time.perf_counter() - t0
        del result
        self.calls += 1
        return t, len(self.texts) > n

    def plan(self, iterations: int, calibration: int, t_min: float, call_s: float):
        """Attributed (STEP) and calibration (CAL) calls, evenly interleaved: (name, i) each.

        At least `iterations` and `calibration` of them; for a fast callable (a traced call
        takes about `call_s`) more, to fill `t_min` seconds: up to _MAX_ATTRIBUTED attributed
        ones (each is read from the trace) and _MAX_CALIBRATION calibration ones (only timed).
        """
        total = int(t_min / max(call_s, 1e-6))
        n_step = min(max(iterations, total // 4), max(iterations, _MAX_ATTRIBUTED))
        n_cal = min(max(calibration, total - n_step), max(calibration, _MAX_CALIBRATION))
        order = sorted(
            [((i + 0.5) / n_step, _events.STEP_NAME, i) for i in range(n_step)]
            + [((j + 0.5) / n_cal, _events.CAL_NAME, j) for j in range(n_cal)]
        )
        return [(step_name, i) for _, step_name, i in order]

    def interleaved(self, calls, times: dict[str, list[float]], dropped: set[int]) -> None:
        """Makes `calls` (from `plan`): their seconds go to `times[name]`; attributed step
        numbers during which jax compiled go to `dropped`."""
        for step_name, i in calls:
            t, compiled = self._annotated_call(step_name, i)
            if compiled:
                self.compiled += 1
                if step_name == _events.STEP_NAME:
                    dropped.add(i)
            else:
                times[step_name].append(t)


def _next_calls(calls: list[tuple[str, int]], done: int, room: int, calibration_first: bool):
    """The next session's calls: `room` calls of the plan from `done` on.

    With `calibration_first`, a calibration call comes first (moved up the plan if need be,
    one call more where the next `room` hold none): the first call after a session stopped
    runs a millisecond or more slower (the stop went through hundreds of megabytes; the
    call's own data left the caches), and a calibration call is only timed, one of many
    whose 10th percentile counts.
    """
    if calibration_first:
        j = next((k for k in range(done, len(calls)) if calls[k][0] == _events.CAL_NAME), None)
        if j is not None and j > done:
            calls.insert(done, calls.pop(j))
            room += j >= done + room
    return calls[done : done + room]


@dataclasses.dataclass
class _Traced:
    """What the traced calls gave: times, the events in windows, where the trace files are."""

    step: list[float]  # attributed calls' seconds
    cal: list[float]  # calibration calls' seconds
    dropped: set[int]  # attributed step numbers during which jax compiled
    compiled: int  # traced calls during which jax compiled
    events: _events.Events
    sessions: int
    exported: tuple[int, Path] | None  # (session, folder of its trace files)


def _trace_calls(s: _Sampler, probes: Probes, iterations, calibration, min_time, ws,
                 export: bool) -> _Traced:  # fmt: skip
    """The traced calls, in as many trace sessions as keep each near _SESSION_EVENTS events.

    Each session starts with calls discarded (`settle`), then takes the next calls of the
    plan, attributed and calibration ones alike, so each session holds both in the same mix;
    the last one ends with the probes. Each is read (its windows only) and dropped before the
    next starts. A callable of few events per call runs in one session, as the plan's calls
    did before sessions were split. With `export`, the first session with an attributed call
    is exported (its trace files are what the output folder gets).
    """
    per_call = s.events_per_call(ws.scratch / "count")
    times: dict[str, list[float]] = {_events.STEP_NAME: [], _events.CAL_NAME: []}
    dropped: set[int] = set()
    events = _events.Events()
    calls: list[tuple[str, int]] | None = None
    call_s = None
    done = compiled = sessions = 0
    exported = None
    while calls is None or done < len(calls):
        session = TraceSession(ws.scratch / f"trace{sessions}")
        with session:
            before = s.compiled
            settled = s.settle(call_s)
            if calls is None:
                call_s = typical(settled or [1.0])
                calls = s.plan(iterations, calibration, min_time, call_s)
            room = max((_SESSION_EVENTS - per_call * len(settled)) // per_call, 1)
            chunk = _next_calls(calls, done, room, calibration_first=sessions > 0)
            s.interleaved(chunk, times, dropped)
            done += len(chunk)
            if done == len(calls):
                probes.run_traced()
            compiled += s.compiled - before
            keep = export and exported is None and any(n == _events.STEP_NAME for n, _ in chunk)
            data = session.stop(export=keep)
        events.extend(_events.read(data, offset=_events.after(events)))
        del data
        release_freed_memory()
        if keep:
            exported = (sessions, session.export())
        sessions += 1
    return _Traced(
        step=times[_events.STEP_NAME],
        cal=times[_events.CAL_NAME],
        dropped=dropped,
        compiled=compiled,
        events=events,
        sessions=sessions,
        exported=exported,
    )


def _run(jax, fn, phases, iterations, repeats, calibration, warmup, min_time, name, hlo, ws):
    """Profiles fn; returns the report and the folder of the trace files to write out."""
    texts: list[str] = list(hlo)
    notes: list[str] = []
    check_no_trace()
    probes = Probes.get()
    probes.time_untraced()
    # The hook stays on throughout: a compile after warm-up is noticed (and its HLO kept).
    with capture_hlo(texts) as hooked:
        with CompileMonitor() as compiles:
            for i in range(warmup):
                _call(jax, fn, "warm-up", i, name)
        s = _Sampler(jax, fn, name, texts)
        # The cost per event differs from trace session to trace session (by a factor of two
        # between a process's first and later ones), which the corrected total of a program
        # with tiny ops multiplies: the calibration calls run in the attributed sessions,
        # alternating with the attributed ones, and uninstrumented calls on both sides.
        untraced = s.untraced(max(repeats // 2, 1), min_time / 2)
        t = _trace_calls(s, probes, iterations, calibration, min_time, ws, ws.out is not None)
        untraced += s.untraced(max(repeats - repeats // 2, 1), min_time / 2)
    traced, cal, dropped = t.step, t.cal, t.dropped
    if not untraced or not cal or not traced:
        raise RuntimeError(
            f"profile: {name!r} compiled again on most calls ({s.compiled} of {s.calls}): a "
            "callable whose shapes change each call cannot be timed; fix the retracing"
        )
    if s.compiled:
        notes.append(
            f"fn compiled after warm-up in {s.compiled} call(s) ({t.compiled} traced), "
            "dropped from the timings: raise warmup"
        )
    if t.sessions > 1:
        where = f"; the trace files hold session {t.exported[0] + 1}'s" if t.exported else ""
        notes.append(
            f"the traced calls ran in {t.sessions} trace sessions of about {_SESSION_EVENTS} "
            f"events each, read one at a time (jax holds about a kilobyte per event of a "
            f"session while it stops it){where}"
        )

    phase_map = PhaseMap([*texts, *probes.texts], phases)
    trace = _events.resolve(t.events, phase_map)
    missing, share = _missing(trace)
    if missing and hooked and share >= 0.01:
        # Executables compiled before the profile: recompile them once to read their HLO.
        jax.clear_caches()
        with capture_hlo(texts):
            _call(jax, fn, "HLO recapture", 0, name)
        phase_map = PhaseMap([*texts, *probes.texts], phases)
        trace = _events.resolve(t.events, phase_map)
        notes.append(
            f"cleared jax caches and recompiled {len(missing)} executable(s) compiled before "
            "profiling to read their HLO"
        )
        missing, share = _missing(trace)
    if missing:
        notes.append(
            f"no HLO for {sorted(missing)} ({100 * share:.1f}% of op time): their ops count as "
            f"{UNSCOPED}; pass hlo=[compiled.as_text()]"
        )
    if trace.unread:
        notes.append(
            f"device planes {sorted(trace.unread)} hold events without HLO op names: that "
            "device time is not attributed (this jax's trace format is not understood)"
        )
    phase_set = frozenset(phases)
    wins = [w for w in _trace.windows(trace, phase_set) if w.step not in dropped]
    if not wins:
        raise RuntimeError("profile: the trace holds no iteration; was another trace running?")
    cal_model = calibrate(
        _trace.windows(trace, phase_set, _events.PROBE_OPS),
        _trace.windows(trace, phase_set, _events.PROBE_HOST),
        probes.untraced,
    )
    # The callable calibrates itself: even-numbered uninstrumented calls against the
    # calibration calls give the overhead; the odd-numbered ones, never used for that, check
    # the corrected total.
    u_cal, u_val = untraced[0::2], untraced[1::2] or untraced
    measured = typical(cal) - typical(u_cal)
    report = build_report(
        mode="callable",
        name=name,
        wins=wins,
        cal=cal_model,
        phases=phases,
        phase_map=phase_map,
        notes=notes,
        measured_overhead_s=measured,
        wall_s=typical(untraced),
        validation_s=typical(u_val),
        wall_samples_s=untraced,
        traced_wall_s=typical(traced),
        compile=compiles.summary(),
    )
    report.overhead.update(
        calibration_traced_s=typical(cal),
        calibration_untraced_s=typical(u_cal),
        calibration_calls=len(cal),
        validation_calls=len(u_val),
    )
    report.coverage["traced_wall_s"] = statistics.fmean(traced)
    report.coverage["fraction"] = report.coverage["attributed_raw_s"] / statistics.fmean(traced)
    return report, t.exported[1] if t.exported else ws.scratch / "trace"


def _missing(trace) -> tuple[set[str], float]:
    """Modules in the trace without HLO text, and their share of fn's op time."""
    missing = trace.missing - {""}
    op_time: Counter = Counter()
    for e in trace.ops:
        if e.module not in PROBE_MODULES:
            op_time[e.module in missing] += e.end - e.start
    return missing, op_time[True] / max(sum(op_time.values()), 1)


def gpu_section(fn, report) -> dict:
    return with_kernel_busy(_gpu.measure(fn), report)


def with_kernel_busy(result: dict, report) -> dict:
    if "nvml_utilization" in result:
        busy = report.device_busy_fraction
        result["kernel_busy_fraction"] = busy
        result["nvml_over_kernel_busy"] = result["nvml_utilization"] / busy if busy > 0 else None
    return result
