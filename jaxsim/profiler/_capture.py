"""Hooks into jax while profiling: the optimized HLO of what it compiles, and compile time."""

from __future__ import annotations

import contextlib
import threading
from collections import Counter


@contextlib.contextmanager
def capture_hlo(texts: list[str]):
    """Records the optimized HLO text of every executable jax compiles (or loads) meanwhile."""
    try:
        from jax._src import compiler

        original = compiler.compile_or_get_cached
    except (ImportError, AttributeError):  # a jax without this hook: HLO must be passed in
        yield False
        return

    def hook(*args, **kwargs):
        executable = original(*args, **kwargs)
        try:
            texts.extend(m.to_string() for m in executable.hlo_modules())
        except Exception:  # best effort: a missing module only makes its ops "(unscoped)"
            pass
        return executable

    compiler.compile_or_get_cached = hook
    try:
        yield True
    finally:
        compiler.compile_or_get_cached = original


# jax.monitoring duration events that make up compile time (jax 0.10-0.11): tracing to a jaxpr,
# lowering to MLIR, the backend compile, and loading from the persistent compilation cache.
_COMPILE_PREFIX = "/jax/core/compile/"
_CACHE_LOAD = "/jax/compilation_cache/cache_retrieval_time_sec"
_BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"

_lock = threading.Lock()
_monitors: list[CompileMonitor] = []
_registered = False


def _listener(event: str, duration: float, **_kwargs) -> None:
    if not (event.startswith(_COMPILE_PREFIX) or event == _CACHE_LOAD):
        return
    with _lock:
        for m in _monitors:
            m.seconds[event] += duration
            m.counts[event] += 1


class CompileMonitor:
    """Sums jax's compile-time events (jax.monitoring) while active; usable as a context manager.

    jax.monitoring has one global listener list, so one listener is registered once and feeds
    every active monitor.
    """

    def __init__(self):
        self.seconds: Counter = Counter()
        self.counts: Counter = Counter()

    def __enter__(self) -> CompileMonitor:
        global _registered
        import jax

        with _lock:
            if not _registered:
                jax.monitoring.register_event_duration_secs_listener(_listener)
                _registered = True
            _monitors.append(self)
        return self

    def __exit__(self, *exc) -> None:
        with _lock:
            if self in _monitors:
                _monitors.remove(self)

    @property
    def total_s(self) -> float:
        return float(sum(self.seconds.values()))

    def summary(self) -> dict:
        """{"seconds": total, "backend_compiles": n, "events": {short name: seconds}}."""
        return {
            "seconds": self.total_s,
            "backend_compiles": int(self.counts[_BACKEND_COMPILE]),
            "events": {k.rsplit("/", 1)[-1]: float(v) for k, v in sorted(self.seconds.items())},
        }
