"""jaxsim.cpu_threads: the opt-in one-thread XLA CPU pool and the guard that sizes it up for
brax's LAPACK kernels (process-wide, before JAX starts)."""

import os
import subprocess
import sys

import jax
import pytest

from jaxsim.cpu_threads import (
    LAPACK_SAFE_THREADS,
    cpu_pool_size,
    ensure_cpu_threads,
    set_cpu_threads,
)
from jaxsim.envs import cpu_threads_needed, size_cpu_pool

# Counts XLA's CPU pool threads after one computation; prints -1 if none has the name XLA gives
# them (a jaxlib that renamed them: nothing to count).
COUNT = (
    "import jax, os; jax.jit(lambda x: x + 1)(1.0); "
    "names = [open(f'/proc/self/task/{t}/comm').read().strip() for t in os.listdir("
    "'/proc/self/task')]; n = names.count('tf_XLAEigen'); print(n if n else -1)"
)


def _run(source: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NPROC"}
    return subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, env=env)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through /proc")
def test_the_pool_has_the_threads_asked_for_when_set_before_jax_starts():
    for n in (1, 3):  # 3: more than this 2-core VM has, so the setting, not the machine, sizes it
        out = _run(f"from jaxsim.cpu_threads import set_cpu_threads; set_cpu_threads({n}); {COUNT}")
        assert out.returncode == 0, out.stderr
        count = int(out.stdout.split()[-1])
        if count == -1:
            pytest.skip("this jaxlib names no thread tf_XLAEigen")
        assert count == n


def test_a_late_call_is_refused_and_changes_nothing():
    source = (
        "import os, jax; jax.numpy.zeros(1); from jaxsim.cpu_threads import set_cpu_threads\n"
        "try:\n    set_cpu_threads(1)\nexcept RuntimeError as e:\n"
        "    print(os.environ.get('NPROC')); print(e)"
    )
    out = _run(source)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "None"  # NPROC left unset
    assert "already started" in lines[1] and "NPROC=1" in lines[1]


@pytest.mark.parametrize(
    "bad, error", [(0, ValueError), (-2, ValueError), (1.0, TypeError), (True, TypeError)]
)
def test_bad_thread_counts_are_named(bad, error):
    with pytest.raises(error, match=r"num_threads must be .*got"):
        set_cpu_threads(bad)


def test_the_gymnasium_front_re_exports_it():
    jgym = pytest.importorskip("jaxsim.gymnasium")
    assert jgym.set_cpu_threads is set_cpu_threads


# ------------------------------------------------------------- the LAPACK guard (brax's physics)
# Two independent chains of batched Cholesky factorisations and triangular solves in one program,
# as brax's generalized pipeline runs them: on a 2-thread pool both kernels block a pool thread
# waiting for pieces queued on that pool, and the process stops at 0% CPU (on the 2-core VM the
# first hundred calls hung in every run; docs/upstream_jaxlib_lapack_deadlock_repro.py). With the
# guard the pool has a thread to spare. On a machine with 4 or more CPUs the guard changes nothing
# and the loop runs on the pool as it is.
TWO_CHAINS = """
import jax, jax.numpy as jnp
from jaxsim.cpu_threads import cpu_pool_size
from jaxsim.envs import size_cpu_pool
print(size_cpu_pool("CartPole-v1", "brax/ant"))
m = jax.random.normal(jax.random.key(0), (2, 1024, 16, 16))
a, b = m @ jnp.swapaxes(m, -1, -2) + 16 * jnp.eye(16)
x = jnp.ones((1024, 16, 1))
f = jax.jit(lambda a, b, x: sum(jax.scipy.linalg.solve_triangular(jnp.linalg.cholesky(m), x,
    lower=True) for m in (a, b)))
for _ in range(300):
    x = jax.block_until_ready(f(a, b, x) * 1e-3 + x)
print(cpu_pool_size())
"""


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="sizes the pool from affinity")
def test_the_lapack_guard_keeps_two_batched_solves_from_deadlocking():
    env = {k: v for k, v in os.environ.items() if k != "NPROC"}
    cmd = [sys.executable, "-c", TWO_CHAINS]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("two batched LAPACK chains stopped for good: the pool was not sized up")
    assert out.returncode == 0, out.stderr
    note, size = out.stdout.strip().splitlines()
    cpus = len(os.sched_getaffinity(0))
    assert int(size) == max(cpus, LAPACK_SAFE_THREADS)
    if cpus < LAPACK_SAFE_THREADS:
        assert note.startswith(f"XLA's CPU pool sized to {LAPACK_SAFE_THREADS} threads")
        assert "LAPACK" in note and "deadlock" in note
    else:
        assert note == "None"


def test_the_guard_leaves_a_pool_that_is_large_enough_or_says_it_cannot_grow(monkeypatch):
    monkeypatch.setenv("NPROC", "6")
    assert cpu_pool_size() == 6
    assert ensure_cpu_threads(6, "why") is None and ensure_cpu_threads(1, "why") is None
    monkeypatch.setenv("NPROC", "2")  # and this process's JAX has started (the next line)
    jax.numpy.zeros(1)
    note = ensure_cpu_threads(4, "brax's physics")
    assert "has 2 threads, fewer than the 4" in note and "brax's physics" in note
    assert "Start the process with NPROC=4" in note
    assert os.environ["NPROC"] == "2"  # unchanged: the pool exists


def test_only_brax_ids_ask_for_more_threads(monkeypatch):
    assert cpu_threads_needed("brax/ant")[0] == LAPACK_SAFE_THREADS
    assert "LAPACK" in cpu_threads_needed("brax/inverted_pendulum")[1]
    for env_id in ("CartPole-v1", "gymnax/Breakout-MinAtar", "MinAtar/Breakout-v0", "brax"):
        assert cpu_threads_needed(env_id) == (1, "")
    monkeypatch.setenv("NPROC", "1")
    assert size_cpu_pool("CartPole-v1", "gymnax/Pendulum-v1") is None and size_cpu_pool() is None


@pytest.mark.parametrize("bad", [0, -1, 2.0, True])
def test_a_bad_minimum_is_named(bad):
    with pytest.raises(ValueError, match=r"minimum must be an int >= 1, got"):
        ensure_cpu_threads(bad, "why")
