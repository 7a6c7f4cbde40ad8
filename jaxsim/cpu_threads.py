"""XLA's CPU runtime as the Gymnasium fronts want it: its thread count (opt-in) and dispatch.

XLA:CPU sizes its intra-op thread pool (threads named `tf_XLAEigen`) to the CPUs the process may
run on, or to the `NPROC` environment variable when it is set; it reads either once, when JAX
starts its CPU client (JAX's first computation). With more than one thread, a compiled program
runs its independent kernels concurrently and splits its compute-heavy loops across the pool.
For a small program called once per Python step and read at once (a Gymnasium vector step of a
few thousand environments), each step then waits for work handed to another thread, and on a
machine whose other cores are busy that wait can cost more than the split saves:
`python -m benchmarks.front.measure` measures the vector front with the pool as started and
with one thread (`docs/upstream_xla_cpu_two_core.md` has a JAX-only reproduction). A whole
rollout pays it too, once per step of its loop: CartPole, 4096 environments, on the 2-core
machine with its other core busy, ran about twice as fast with one thread (and alike with the
other core idle); no per-program compile option removes the split.

`set_cpu_threads(1)` is that one-thread setting, made on request only: it is process-wide, and
every other XLA CPU computation in the process (a rollout, a training update) then runs on one
thread too. jaxsim never makes it on its own (the guard below only ever adds threads).

Asynchronous dispatch is the other process-wide setting: jaxsim changes it only when asked
(`jaxsim.gymnasium.cpu_dispatch(sync=True)`, before JAX's first computation).

A pool too small is also a correctness problem. jaxlib's batched LAPACK kernels (Cholesky
factorisations, triangular solves) split their batch over the same pool and block a pool thread
until the pieces are done; when as many of them run at once as the pool has threads, no thread
is left to run the pieces and the process stops for good at 0% CPU
(`docs/upstream_jaxlib_lapack_deadlock.md`). brax's generalized pipeline runs such kernels every
step. `ensure_cpu_threads` is the guard a program that owns its process (the train command, a
benchmark) calls before JAX starts, through `jaxsim.envs.size_cpu_pool(env_id)`.
"""

from __future__ import annotations

import os

__all__ = [
    "LAPACK_SAFE_THREADS",
    "cpu_pool_size",
    "ensure_cpu_threads",
    "set_cpu_threads",
]

_VARIABLE = "NPROC"  # read by XLA's DefaultThreadPoolSize when the CPU client starts


def _backends_started() -> bool:
    try:
        from jax._src.xla_bridge import backends_are_initialized
    except ImportError:  # a jax without it: assume started
        return True
    return backends_are_initialized()


def set_cpu_threads(num_threads: int) -> None:
    """Sizes XLA's CPU thread pool to `num_threads` for this process (sets `NPROC`).

    Call it before JAX's first computation (importing jax or jaxsim is fine; the CPU client
    starts with the first array or compiled call). It is process-wide: every XLA CPU
    computation of the process runs on at most `num_threads` threads. `set_cpu_threads(1)`
    makes a per-step loop over a small jitted program (the Gymnasium vector front) skip its
    hand-offs to other threads; see this module's docstring for when that pays.

    Args:
      num_threads: a positive int.

    Raises:
      TypeError, ValueError: `num_threads` is not a positive int.
      RuntimeError: JAX has already started its backends (the pool exists; the setting would
        be ignored), naming how to set it instead.
    """
    if isinstance(num_threads, bool) or not isinstance(num_threads, int):
        raise TypeError(f"set_cpu_threads: num_threads must be an int, got {num_threads!r}")
    if num_threads < 1:
        raise ValueError(f"set_cpu_threads: num_threads must be >= 1, got {num_threads}")
    if _backends_started():
        raise RuntimeError(
            "set_cpu_threads: JAX has already started its backends, so XLA's CPU thread pool "
            f"exists and {_VARIABLE} would be ignored; call it before JAX's first computation, "
            f"or start the process with the environment variable {_VARIABLE}={num_threads}"
        )
    os.environ[_VARIABLE] = str(num_threads)  # putenv: XLA reads it with getenv at start


# Threads a pool needs for programs that may run batched LAPACK kernels side by side: one more
# than the kernels that run at once. Measured with docs/upstream_jaxlib_lapack_deadlock_repro.py
# on the 2-core VM: two independent chains stop a 2-thread pool at once and ran 2,000 calls on
# 3 threads; three chains stop a 3-thread pool at once and ran 1,550 calls (60 s) on 4. The hung
# brax ant loop had two kernels running; 4 leaves room for a third. brax's ant rollout stepped as
# fast on 4 and 8 threads as on the 2 the VM gives (6.3k-6.4k env-steps/s, 2048 envs).
LAPACK_SAFE_THREADS = 4


def cpu_pool_size() -> int:
    """The threads XLA's CPU pool has (or will have when JAX starts): `NPROC` where it is a
    positive int, else the CPUs this process may run on."""
    value = os.environ.get(_VARIABLE, "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def ensure_cpu_threads(minimum: int, reason: str) -> str | None:
    """Makes XLA's CPU pool at least `minimum` threads, if JAX has not started yet.

    Meant for a program that owns its process (a command line, a benchmark), called before
    JAX's first computation with what an environment needs (`jaxsim.envs.size_cpu_pool`). It is
    process-wide, as `set_cpu_threads`; subprocesses inherit it (`NPROC`).

    Args:
      minimum: the fewest threads the process's programs run safely on.
      reason: why, for the returned sentence (e.g. "brax's physics runs batched LAPACK
        kernels").

    Returns:
      None where the pool has `minimum` threads or more already; else a sentence for the
      program to print: that the pool was sized to `minimum` threads, or, when JAX has started
      (the pool exists and cannot grow), that it was not and how to start the process instead.
    """
    if isinstance(minimum, bool) or not isinstance(minimum, int) or minimum < 1:
        raise ValueError(f"ensure_cpu_threads: minimum must be an int >= 1, got {minimum!r}")
    size = cpu_pool_size()
    if size >= minimum:
        return None
    if _backends_started():
        return (
            f"XLA's CPU pool has {size} threads, fewer than the {minimum} this run needs "
            f"({reason}), and JAX has started, so it cannot grow: the run may stop for good. "
            f"Start the process with {_VARIABLE}={minimum}."
        )
    os.environ[_VARIABLE] = str(minimum)
    sized = f"XLA's CPU pool sized to {minimum} threads ({_VARIABLE}={minimum}, not {size})"
    return f"{sized}: {reason}"
