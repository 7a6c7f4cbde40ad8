"""jaxsim.cpu_threads: the opt-in one-thread XLA CPU pool (process-wide, before JAX starts)."""

import os
import subprocess
import sys

import pytest

from jaxsim.cpu_threads import set_cpu_threads

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
