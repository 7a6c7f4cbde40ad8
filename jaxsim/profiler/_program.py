"""`with profile() as prof:` -- a block of code (a whole program) split into phases."""

from __future__ import annotations

import contextlib
import statistics
import time

from jaxsim.profiler import _events, _gpu, _trace
from jaxsim.profiler._breakdown import build_report
from jaxsim.profiler._calibrate import PROBE_MODULES, Probes, calibrate
from jaxsim.profiler._capture import CompileMonitor, capture_hlo
from jaxsim.profiler._hlo import UNSCOPED, PhaseMap
from jaxsim.profiler._report import ProfileReport
from jaxsim.profiler._session import (
    DEFAULT_PHASES,
    TraceSession,
    Workspace,
    check_hlo,
    check_name,
    check_no_trace,
    check_phases,
    release_freed_memory,
    write_outputs,
)


class Profiler:
    """Profiles the code run inside a `with` block; the report is `prof.report` afterwards.

    Everything between `__enter__` and `__exit__` on this thread is one window: device time per
    named phase, device idle time between kernels, host time in annotations named after a phase,
    dispatch, compilation, other Python and waiting. Compile time (jax.monitoring) and the
    number of dispatches are reported apart. The block runs once, so by default the trace
    overhead is corrected with the probes' per-event model only, which misses by tens of
    percent on programs of many tiny ops. `baseline`: uninstrumented runs of the same code
    (`{"wall_s", "compile_s"}` each, as `python -m jaxsim.profiler --baseline N` measures them
    in child processes): the even-numbered ones calibrate the correction (their run time,
    compile apart, against the traced one), the odd-numbered ones check it.

    Use `with prof.step(): ...` to mark iterations: dispatches are then also given per step.
    Outputs are written at exit; if the block raises, nothing is written and the exception
    propagates (SystemExit(0) counts as success).
    """

    def __init__(
        self,
        *,
        phases=DEFAULT_PHASES,
        out_dir=None,
        name: str = "profile",
        hlo=(),
        png: bool = True,
        gpu_utilization: bool | None = None,
        baseline: list[dict] | dict | None = None,
    ):
        self.phases = check_phases(phases)
        self.name = check_name(name)
        self.out_dir = out_dir
        self.hlo = check_hlo(hlo)
        self.png = png
        self.gpu_utilization = gpu_utilization
        if isinstance(baseline, dict):
            baseline = [baseline]
        self.baseline = [dict(b) for b in baseline] if baseline else None
        self.report: ProfileReport | None = None
        self._steps = 0
        self._active = False

    # --------------------------------------------------------------------------------- protocol
    def __enter__(self) -> Profiler:
        import jax

        if self._active or self.report is not None:
            raise RuntimeError("profile: a Profiler runs once; make a new one")
        check_no_trace()
        self._ws = Workspace(self.out_dir)
        self._stack = contextlib.ExitStack()
        self._session = None
        try:
            self._texts = list(self.hlo)
            self._hooked = self._stack.enter_context(capture_hlo(self._texts))
            self._compiles = self._stack.enter_context(CompileMonitor())
            self._gpu = None
            if self.gpu_utilization or (
                self.gpu_utilization is None and jax.default_backend() == "gpu"
            ):
                self._gpu = _gpu.Sampler().start()
            self._session = TraceSession(self._ws.scratch).start()
            self._window = jax.profiler.TraceAnnotation(_events.RUN_NAME)
            self._window.__enter__()
            self._t0 = time.perf_counter()
        except BaseException:
            if getattr(self, "_session", None) is not None:
                self._session.abort()
            self._stack.close()
            self._ws.discard()
            raise
        self._active = True
        return self

    def step(self):
        """A context manager marking one iteration of the profiled code."""
        import jax

        self._steps += 1
        return jax.profiler.StepTraceAnnotation(_events.STEP_NAME, step_num=self._steps - 1)

    def __exit__(self, exc_type, exc, tb) -> bool:
        import jax

        ok = exc_type is None or (
            issubclass(exc_type, SystemExit) and exc is not None and exc.code in (None, 0)
        )
        self._active = False
        try:
            if ok:  # the block's work may still be running asynchronously: it belongs here
                with jax.profiler.TraceAnnotation(_events.WAIT_NAME):
                    jax.block_until_ready(jax.live_arrays())
            self._window.__exit__(None, None, None)
            wall = time.perf_counter() - self._t0
            self._stack.close()  # the HLO hook and the compile monitor
            gpu = self._gpu.stop() if self._gpu is not None else {}
            if not ok:
                self._session.abort()
                self._ws.discard()
                if exc is not None and not isinstance(exc, SystemExit):
                    exc.add_note(
                        f"jaxsim.profile: the profiled block {self.name!r} raised; no output "
                        "was written"
                    )
                return False
            probes = Probes.get()  # after the block: nothing of the profiler runs before it
            probes.run_traced()
            # Only the windows' events are kept: the ProfileData goes before the report is made.
            events = _events.read(self._session.stop(export=self._ws.out is not None))
            release_freed_memory()
            probes.time_untraced()
            self.report = self._report(events, probes, wall, gpu)
            if self._ws.out is not None:
                write_outputs(self.report, self._session.export(), self._ws, self.name, self.png)
            self._ws.close()
        except BaseException:
            self._session.abort()
            self._ws.discard()
            raise
        return False

    # ----------------------------------------------------------------------------------- report
    def _report(self, events, probes: Probes, wall: float, gpu: dict) -> ProfileReport:
        notes: list[str] = []
        phase_set = frozenset(self.phases)
        phase_map = PhaseMap([*self._texts, *probes.texts], self.phases)
        trace = _events.resolve(events, phase_map)
        missing = trace.missing - {""} - set(PROBE_MODULES)
        if missing:
            notes.append(
                f"no HLO for {sorted(missing)} (compiled before the profile started): their "
                f"ops count as {UNSCOPED}; pass hlo=[compiled.as_text()]"
            )
        if trace.unread:
            notes.append(
                f"device planes {sorted(trace.unread)} hold events without HLO op names: that "
                "device time is not attributed (this jax's trace format is not understood)"
            )
        run = _trace.windows(trace, phase_set, _events.RUN_NAME)
        if len(run) != 1:
            raise RuntimeError(f"profile: found {len(run)} profiled blocks in the trace, not 1")
        steps = _trace.windows(trace, phase_set, _events.STEP_NAME)
        cal = calibrate(
            _trace.windows(trace, phase_set, _events.PROBE_OPS),
            _trace.windows(trace, phase_set, _events.PROBE_HOST),
            probes.untraced,
        )
        compile_s = self._compiles.total_s
        measured = None
        if self.baseline:  # calibrate on uninstrumented runs of the same code (compile apart)
            runs = [b["wall_s"] - b.get("compile_s", 0.0) for b in self.baseline]
            measured = (run[0].wall - compile_s) - statistics.median(runs[0::2])
        report = build_report(
            mode="program",
            name=self.name,
            wins=run,
            cal=cal,
            phases=self.phases,
            phase_map=phase_map,
            notes=notes,
            measured_overhead_s=measured,
            traced_wall_s=run[0].wall,
            compile=self._compiles.summary(),
        )
        report.iterations = len(steps)
        report.dispatches = float(run[0].launches)
        if steps:
            report.dispatches_per_iteration = statistics.fmean(w.launches for w in steps)
        report.coverage["host_clock_s"] = wall
        if self.baseline:
            report.baseline = _check_baseline(self.baseline, report)
        if gpu:
            from jaxsim.profiler._callable import with_kernel_busy

            report.gpu = with_kernel_busy(gpu, report)
        return report


def _check_baseline(baseline: list[dict], report: ProfileReport) -> dict:
    """The corrected run time (compile excluded) against uninstrumented runs' run time.

    The even-numbered runs calibrated the correction; the odd-numbered ones, if any, check it.
    With one run the calibrated correction matches it by construction: only the probe model's
    error (the correction without calibration) is measured then.
    """
    runs = [b["wall_s"] - b.get("compile_s", 0.0) for b in baseline]
    cal, val = runs[0::2], runs[1::2]
    reference = statistics.median(val or cal)
    compile_s = report.compile_s
    o = report.overhead

    def error(total):
        return (total - compile_s) / reference - 1 if reference > 0 else None

    b = {
        "runs": list(baseline),
        "run_s": reference,
        "calibration_run_s": statistics.median(cal),
        "validation_runs": len(val),
        "profiled_run_s": report.wall_s - compile_s,
        "compile_s": statistics.median(x.get("compile_s", 0.0) for x in baseline),
        "error": error(o["corrected_s"]) if val else None,
        "model_error": error(o["model_corrected_s"]),
        "uncorrected_error": error(o["traced_s"]),
    }
    o["validation_s"] = reference
    o["corrected_error"] = b["error"]
    o["model_error"] = b["model_error"]
    if not val:
        report.notes.append(
            "one baseline run: it calibrated the correction, so only the probe model's error "
            "is measured; --baseline 2 checks the calibrated correction on a run it did not see"
        )
    return b
