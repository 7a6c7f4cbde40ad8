"""`profile(fn)`: one call of a callable split into phases, calibrated on the callable itself."""

from __future__ import annotations

import statistics
import time
from collections import Counter

from jaxsim.profiler import _gpu, _trace
from jaxsim.profiler._breakdown import build_report
from jaxsim.profiler._calibrate import PROBE_MODULES, Probes, calibrate, typical
from jaxsim.profiler._capture import CompileMonitor, capture_hlo
from jaxsim.profiler._hlo import UNSCOPED, PhaseMap
from jaxsim.profiler._session import TraceSession, Workspace, check_no_trace, write_outputs

_WARM_NAME = "jaxsim.profile.warmup"
_MAX_SAMPLES = 2000  # per block: a very fast callable stops here rather than at min_time
_MAX_ATTRIBUTED = 30  # traced calls read from the trace, at most (unless iterations says more)
_MAX_CALIBRATION = 300  # traced calls only timed, at most (unless calibration says more)
_SETTLE_S = 0.05  # traced calls discarded at the start of each trace session


def profile_callable(fn, *, phases, iterations, repeats, calibration, warmup, min_time, out_dir,
                     name, hlo, png, gpu_utilization):  # fmt: skip
    import jax

    ws = Workspace(out_dir)
    try:
        report, session = _run(
            jax, fn, phases, iterations, repeats, calibration, warmup, min_time, name, hlo, ws
        )
        if gpu_utilization or (gpu_utilization is None and jax.default_backend() == "gpu"):
            report.gpu = gpu_section(lambda: _call(jax, fn, "NVML sampling", 0, name), report)
        if ws.out is not None:
            write_outputs(report, session.export(), ws, name, png)
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

    def settle(self) -> float:
        """Discards the first calls after a trace starts, which run slower; their time."""
        return typical(self.traced(_WARM_NAME, 1, _SETTLE_S, n_max=20) or [1.0])

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
            with jax.profiler.TraceAnnotation(_trace.WAIT_NAME):
                jax.block_until_ready(result)
        t = time.perf_counter() - t0
        del result
        self.calls += 1
        return t, len(self.texts) > n

    def interleaved(self, iterations: int, calibration: int, t_min: float, call_s: float):
        """Attributed (STEP) and calibration (CAL) calls, evenly interleaved in one trace.

        At least `iterations` and `calibration` of them; for a fast callable (a traced call
        takes about `call_s`) more, to fill `t_min` seconds: up to _MAX_ATTRIBUTED attributed
        ones (each is read from the trace) and _MAX_CALIBRATION calibration ones (only timed).
        Returns (attributed seconds, calibration seconds, attributed step numbers dropped
        because jax compiled during them).
        """
        total = int(t_min / max(call_s, 1e-6))
        n_step = min(max(iterations, total // 4), max(iterations, _MAX_ATTRIBUTED))
        n_cal = min(max(calibration, total - n_step), max(calibration, _MAX_CALIBRATION))
        order = sorted(
            [((i + 0.5) / n_step, _trace.STEP_NAME, i) for i in range(n_step)]
            + [((j + 0.5) / n_cal, _trace.CAL_NAME, j) for j in range(n_cal)]
        )
        times: dict[str, list[float]] = {_trace.STEP_NAME: [], _trace.CAL_NAME: []}
        dropped: set[int] = set()
        for _, step_name, i in order:
            t, compiled = self._annotated_call(step_name, i)
            if compiled:
                self.compiled += 1
                if step_name == _trace.STEP_NAME:
                    dropped.add(i)
            else:
                times[step_name].append(t)
        return times[_trace.STEP_NAME], times[_trace.CAL_NAME], dropped


def _run(jax, fn, phases, iterations, repeats, calibration, warmup, min_time, name, hlo, ws):
    texts: list[str] = list(hlo)
    notes: list[str] = []
    check_no_trace()
    probes = Probes.get()
    probes.time_untraced()
    session = TraceSession(ws.scratch)
    # The hook stays on throughout: a compile after warm-up is noticed (and its HLO kept).
    with capture_hlo(texts) as hooked:
        with CompileMonitor() as compiles:
            for i in range(warmup):
                _call(jax, fn, "warm-up", i, name)
        s = _Sampler(jax, fn, name, texts)
        # The cost per event differs from trace session to trace session (by a factor of two
        # between a process's first and later ones), which the corrected total of a program
        # with tiny ops multiplies: the calibration calls run in the attributed session,
        # alternating with the attributed ones, and uninstrumented calls on both sides.
        untraced = s.untraced(max(repeats // 2, 1), min_time / 2)
        with session:
            call_s = s.settle()
            compiled_before = s.compiled
            traced, cal, dropped = s.interleaved(iterations, calibration, min_time, call_s)
            compiled_in_trace = s.compiled - compiled_before
            probes.run_traced()
            data = session.stop()
        untraced += s.untraced(max(repeats - repeats // 2, 1), min_time / 2)
    if not untraced or not cal or not traced:
        raise RuntimeError(
            f"profile: {name!r} compiled again on most calls ({s.compiled} of {s.calls}): a "
            "callable whose shapes change each call cannot be timed; fix the retracing"
        )
    if s.compiled:
        notes.append(
            f"fn compiled after warm-up in {s.compiled} call(s) ({compiled_in_trace} traced), "
            "dropped from the timings: raise warmup"
        )

    phase_map = PhaseMap([*texts, *probes.texts], phases)
    trace = _trace.load(data, phase_map)
    missing, share = _missing(trace)
    if missing and hooked and share >= 0.01:
        # Executables compiled before the profile: recompile them once to read their HLO.
        jax.clear_caches()
        with capture_hlo(texts):
            _call(jax, fn, "HLO recapture", 0, name)
        phase_map = PhaseMap([*texts, *probes.texts], phases)
        trace = _trace.load(data, phase_map)
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
        _trace.windows(trace, phase_set, _trace.PROBE_OPS),
        _trace.windows(trace, phase_set, _trace.PROBE_HOST),
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
    return report, session


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
