"""What tracing costs per event: two small probes, timed with and without the trace.

The op probe (a jitted scan of small kernels) is almost only op events; the host probe (a
Python loop of annotated dispatches of a scalar jit) is mostly host events. Their traced and
uninstrumented times give the overhead of one op event and of one host event. This generic model
is what corrects a whole-program profile; a profiled callable is calibrated on itself as well
(see `_breakdown.correct`), because the cost per op event differs from program to program.
"""

from __future__ import annotations

import dataclasses
import statistics
import time


def typical(xs) -> float:
    """The 10th percentile (interpolated): the time of a call no other process delayed.

    On a shared machine call times are bimodal: a descheduled thread, or one waiting for a
    core another process holds, adds milliseconds to a call and never takes any away, and on
    two loaded cores that happens to most calls for seconds at a time. The median lands
    between the modes and moves from run to run; a low percentile does not, and unlike the
    minimum it does not drift lower the more calls there are.
    """
    xs = sorted(xs)
    if len(xs) == 1:
        return xs[0]
    pos = 0.1 * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


PROBE_STEPS = 200
HOST_PROBE_CALLS = 32
PROBE_MODULES = ("jit__jaxsim_profile_probe", "jit__jaxsim_profile_host_probe")
_PROBE_ANNOTATION = "jaxsim.profile.probe.annotation"


class Probes:
    """The two calibration programs, compiled once per process (`Probes.get()`)."""

    _instance: Probes | None = None

    @classmethod
    def get(cls) -> Probes:
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def __init__(self):
        import jax
        import jax.numpy as jnp

        from jaxsim.profiler._capture import capture_hlo

        def body(carry, _):
            a, b = carry
            a = jnp.sin(a) * 1.0001 + b
            b = b * 0.999 + a[::-1]
            return (a, b), a[:4]

        def _jaxsim_profile_probe(x):
            return jax.lax.scan(body, (x, x), None, length=PROBE_STEPS)

        def _jaxsim_profile_host_probe(x):
            return x + 1.0

        x = jnp.ones((1024,), jnp.float32)
        s = jnp.zeros((), jnp.float32)
        ops = jax.jit(_jaxsim_profile_probe)
        host = jax.jit(_jaxsim_profile_host_probe)
        self.texts: list[str] = []
        with capture_hlo(self.texts):  # compiles each once, through the usual jit path
            jax.block_until_ready((ops(x), host(s)))
        self._ops = lambda: ops(x)

        def host_loop():
            y = s
            for _ in range(HOST_PROBE_CALLS):
                with jax.profiler.TraceAnnotation(_PROBE_ANNOTATION):
                    y = host(y)
            return y

        self._host = host_loop
        jax.block_until_ready((self._ops(), self._host()))
        self.untraced: dict[str, float] = {}

    def time_untraced(self, repeats: int = 9) -> None:
        """Median uninstrumented seconds of each probe (call before the trace starts)."""
        import jax

        for name, fn in (("ops", self._ops), ("host", self._host)):
            samples = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                jax.block_until_ready(fn())
                samples.append(time.perf_counter() - t0)
            self.untraced[name] = typical(samples)

    def run_traced(self, repeats: int = 9) -> None:
        """Runs each probe under step annotations the trace reader finds (inside a trace)."""
        import jax

        from jaxsim.profiler._events import PROBE_HOST, PROBE_OPS

        for name, fn in ((PROBE_OPS, self._ops), (PROBE_HOST, self._host)):
            for i in range(repeats):
                with jax.profiler.StepTraceAnnotation(name, step_num=i):
                    jax.block_until_ready(fn())


@dataclasses.dataclass
class Calibration:
    """Trace overhead per event, from the probes. Seconds."""

    op_s: float  # one traced op event, in all
    in_event_s: float  # of op_s, the part inside the event's own span
    host_s: float  # one host trace event (annotation, dispatch internals)
    probe_untraced_s: dict[str, float]
    probe_traced_s: dict[str, float]
    probe_events: dict[str, dict[str, float]]

    @property
    def after_event_s(self) -> float:
        return max(self.op_s - self.in_event_s, 0.0)

    def to_dict(self) -> dict:
        return {
            "op_event_s": self.op_s,
            "op_in_event_s": self.in_event_s,
            "host_event_s": self.host_s,
            "probe_untraced_s": self.probe_untraced_s,
            "probe_traced_s": self.probe_traced_s,
            "probe_events": self.probe_events,
        }


def calibrate(ops_windows, host_windows, untraced: dict[str, float]) -> Calibration:
    """Solves the two probes' (traced - untraced) for the op-event and host-event costs."""
    med = statistics.median

    def summary(ws):
        if not ws:
            return 0.0, 0.0, 0.0
        return (
            typical(w.wall for w in ws),
            med(w.op_events for w in ws),
            med(w.host_event_count for w in ws),
        )

    ta, na, ha = summary(ops_windows)
    tb, nb, hb = summary(host_windows)
    da = max(ta - untraced.get("ops", ta), 0.0)
    db = max(tb - untraced.get("host", tb), 0.0)
    # [na ha; nb hb] [op; host] = [da; db]; the op probe has few host events, the host probe
    # few op events, so the system is well conditioned.
    det = na * hb - ha * nb
    if det > 0:
        op = (da * hb - ha * db) / det
        host = (na * db - nb * da) / det
    else:
        op, host = (da / na if na else 0.0), 0.0
    if op < 0 or host < 0:  # noise on a busy machine: fall back to one class at a time
        op = da / na if na else 0.0
        host = max(db - op * nb, 0.0) / hb if hb else 0.0
    scalars = [d for w in ops_windows for d in w.scalar_durations]
    in_event = min(statistics.median(scalars), op) if scalars else 0.0
    return Calibration(
        op_s=op,
        in_event_s=in_event,
        host_s=host,
        probe_untraced_s=dict(untraced),
        probe_traced_s={"ops": ta, "host": tb},
        probe_events={
            "ops": {"op_events": na, "host_events": ha},
            "host": {"op_events": nb, "host_events": hb},
        },
    )
