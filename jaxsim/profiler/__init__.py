"""Per-phase time breakdown of jitted JAX code: `jaxsim.profile(fn)` or `with jaxsim.profile():`.

jax's profiler records every executed XLA op (thunk on CPU, kernel on GPU); the optimized HLO
carries each op's `jax.named_scope` path as `op_name` metadata. Joining the two attributes device
time to the innermost known phase of each op; the gaps between kernels of a running executable
are that phase's device idle time; host annotations, dispatch, compilation and the rest of the
host's time account for what is left of the wall time. Trace overhead is measured and taken out.

Two ways in, one name:

    report = jaxsim.profile(fn, phases=...)        # fn() is one iteration: per-iteration report
    with jaxsim.profile(phases=..., out_dir="prof", name="train") as prof:
        ...                                         # any code: a whole-run report
    print(prof.report.format_table())

and from the shell, in the style of `python -m cProfile`:

    python -m jaxsim.profiler -o prof/ -m agents.train ppo --env CartPole-v1
    python -m jaxsim.profiler -o prof/ script.py --its-args
    python -m jaxsim.profiler show prof/train.json

Note: `jaxsim.profile` is the function once `jaxsim` is imported (so `import jaxsim.profiler as
m` binds the function too); import the module's other names with `from jaxsim.profiler import
Profiler, ProfileReport`, or run it with `python -m jaxsim.profiler`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from typing import Any

from jaxsim.profiler._hlo import UNSCOPED
from jaxsim.profiler._plot import plot_report, plot_stacked
from jaxsim.profiler._program import Profiler
from jaxsim.profiler._report import ProfileReport, Row
from jaxsim.profiler._session import (
    DEFAULT_PHASES,
    check_count,
    check_hlo,
    check_name,
    check_phases,
    staging_dir,
)
from jaxsim.profiler._trace import COMPILE, DISPATCH, IDLE, PYTHON

__all__ = [
    "COMPILE",
    "DEFAULT_PHASES",
    "DISPATCH",
    "IDLE",
    "PYTHON",
    "UNSCOPED",
    "ProfileReport",
    "Profiler",
    "Row",
    "check_output_dir",
    "parse_phases",
    "plot_report",
    "plot_stacked",
    "profile",
]


def parse_phases(text: str) -> tuple[str, ...]:
    """A comma-separated list of phase names, as the command lines take it ("rollout,loss")."""
    return tuple(p.strip() for p in text.split(",") if p.strip())


def check_output_dir(out_dir: str | os.PathLike) -> None:
    """Raises OSError, with the reason, if `profile(out_dir=...)` could not write there.

    Leaves nothing behind (folders it had to create are removed again): call it before a long
    run whose profile is written at the end.
    """
    _, staging, created = staging_dir(out_dir)
    shutil.rmtree(created or staging, ignore_errors=True)


_CALLABLE_ONLY = ("iterations", "repeats", "calibration", "warmup", "min_time")


def profile(
    fn: Callable[[], Any] | None = None,
    *,
    phases: Sequence[str] = DEFAULT_PHASES,
    out_dir: str | os.PathLike | None = None,
    name: str = "profile",
    hlo: Sequence[str] = (),
    png: bool = True,
    gpu_utilization: bool | None = None,
    iterations: int | None = None,
    repeats: int | None = None,
    calibration: int | None = None,
    warmup: int | None = None,
    min_time: float | None = None,
) -> ProfileReport | Profiler:
    """Profiles `fn()` (returns a ProfileReport), or, without fn, the code in a `with` block.

    With fn: each call of `fn` is one iteration; its outputs are blocked on. `fn` is called
    `warmup` times (compilation happens here and is reported as `report.compile`), then timed
    uninstrumented, then traced: `iterations` attributed calls alternating with `calibration`
    calls that are only timed, then uninstrumented again. The traced calls share one trace
    session, or, when they would record more than some 200k trace events (a loop of many
    small ops), as many sessions as keep each near that, each read and dropped before the
    next: jax holds about a kilobyte per event while it stops a session. The callable calibrates
    the overhead on itself: calibration calls minus every other uninstrumented call is what
    tracing adds per call; that much is taken out of the attributed calls, placed where the
    probes' per-event model puts it. The corrected total is checked against the other
    uninstrumented calls, never used for the calibration (`report.overhead["corrected_error"]`),
    then the rows are scaled to the uninstrumented time (`report.wall_s`). Times are "typical":
    the 10th percentile of the calls: on a shared machine other processes add milliseconds to
    some calls, or to most for a while, and never take any away.
    Executables compiled before the profile started are recompiled once after
    `jax.clear_caches()` to read their HLO, unless their `compiled.as_text()` is passed in `hlo`.

    Without fn: returns a `Profiler`; `with jaxsim.profile(...) as prof:` profiles the block's
    code once, as a whole (seconds in all), and sets `prof.report`; see `Profiler`.

    Args:
      fn: a callable of no arguments (close over state, or use functools.partial), or None.
      phases: names of `jax.named_scope`s (and of host `jax.profiler.TraceAnnotation`s) to report;
        each op goes to the innermost listed scope on its path, else to "(unscoped)".
      out_dir: if given, writes `<name>.json`, `<name>.png` (if matplotlib is installed) and the
        trace (`<name>.trace.json.gz` for ui.perfetto.dev, `<name>.xplane.pb` for xprof) there,
        all at the end; if the code raises, nothing is written. Of several trace sessions, the
        trace is the first one with an attributed call (`report.notes` says so).
      name: the file stem and the report's title.
      hlo: optimized HLO texts (`jax.jit(f).lower(*a).compile().as_text()`) of executables
        compiled before profiling started.
      png: write the PNG (a bar per phase, stacked by resource: device, device idle, host).
      gpu_utilization: sample NVML's utilization meanwhile and set it beside the kernel-busy
        fraction; None means "if jax runs on a GPU". Skipped with a reason where NVML is absent.
      iterations: (fn only; default 10) traced calls attributed, at least (key-wise medians
        over the faster half).
      repeats: (fn only; default 10) at least this many uninstrumented calls.
      calibration: (fn only; default 10) at least this many traced calibration calls (only
        timed, not read from the trace).
      warmup: (fn only; default 2) calls before anything is measured, >= 1.
      min_time: (fn only; default 1.0) the uninstrumented and the traced calls each run for
        about this many seconds in all: more calls of a fast callable steady the estimates
        (up to 30 attributed and 300 calibration calls).

    Returns:
      With fn, a `ProfileReport` whose `rows` add up to `wall_s`, the uninstrumented seconds per
      iteration (`print(report.format_table())` shows it); without fn, a `Profiler`.
    """
    check_phases(phases)
    check_name(name)
    hlo = check_hlo(hlo)
    values = (iterations, repeats, calibration, warmup, min_time)
    given = [k for k, v in zip(_CALLABLE_ONLY, values, strict=True) if v is not None]
    if fn is None:
        if given:
            raise TypeError(
                f"profile: {given} apply to profile(fn) only; a `with profile():` block runs once"
            )
        return Profiler(
            phases=phases,
            out_dir=out_dir,
            name=name,
            hlo=hlo,
            png=png,
            gpu_utilization=gpu_utilization,
        )
    if not callable(fn):
        raise TypeError(f"profile: fn must be callable or None, got {type(fn).__name__}")
    min_time = 1.0 if min_time is None else min_time
    if isinstance(min_time, bool) or not isinstance(min_time, int | float) or min_time < 0:
        raise ValueError(f"profile: min_time must be seconds >= 0, got {min_time!r}")
    from jaxsim.profiler._callable import profile_callable

    return profile_callable(
        fn,
        phases=tuple(phases),
        iterations=check_count("iterations", 10 if iterations is None else iterations, 1),
        repeats=check_count("repeats", 10 if repeats is None else repeats, 1),
        calibration=check_count("calibration", 10 if calibration is None else calibration, 1),
        warmup=check_count("warmup", 2 if warmup is None else warmup, 1),
        min_time=float(min_time),
        out_dir=out_dir,
        name=name,
        hlo=hlo,
        png=png,
        gpu_utilization=gpu_utilization,
    )
