"""Shared test setup: XLA compiles for tests, GPU-marked tests skip cleanly where jax sees no GPU,
compiled programs dropped between modules, and an opt-in profile of where the suite's time goes."""

import atexit
import ctypes
import gc
import os
import shutil
import subprocess
import sys
import tempfile
import time

import jax
import pytest

# Tests compile hundreds of small programs and run each for milliseconds: on a 2-core CPU, XLA's
# compile was ~75% of the suite's CPU time. With LLVM at -O1 and XLA:CPU's loop emitters instead
# of its newer fusion emitters, a compile takes about 60% of the CPU time and less memory
# (tests/jaxsim/test_params.py: 54 -> 34 CPU-s, 976 -> 804 MB); the programs compute the same
# values, more slowly. (-O0 is faster still but changes some floats in one program and not in
# another: MountainCar's and the Swarm's single-env steps then differ from the batched ones in
# the last bit.) Subprocesses inherit the flags. Benchmarks and users compile with XLA's
# defaults; tests/jaxsim/test_default_xla.py runs the bit-equality checks that way, and
# JAXSIM_TEST_XLA=default runs the whole suite that way.
FAST_COMPILE_FLAGS = ("--xla_backend_optimization_level=1", "--xla_cpu_use_fusion_emitters=false")


def _cpu_only_and_accepts(flags: str) -> bool:
    """Whether jax sees only a CPU and this jaxlib starts with `flags` (XLA aborts a process on
    an unknown flag, and the emitter flag is not in every version). A GPU's tests keep XLA's
    defaults: there the kernels, not the compiles, are what they check."""
    probe = [sys.executable, "-c", "import jax; print({d.platform for d in jax.devices()})"]
    env = dict(os.environ, XLA_FLAGS=flags)
    proc = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=300)
    return proc.returncode == 0 and proc.stdout.strip() == "{'cpu'}"


def _use_fast_compile_flags() -> None:
    current = os.environ.get("XLA_FLAGS", "").split()
    if os.environ.get("JAXSIM_TEST_XLA") == "default":  # XLA's defaults, even where inherited
        os.environ["XLA_FLAGS"] = " ".join(f for f in current if f not in FAST_COMPILE_FLAGS)
        return
    if FAST_COMPILE_FLAGS[0] in current:
        return  # set already (an xdist worker inherits them)
    flags = " ".join([*current, *FAST_COMPILE_FLAGS])
    if _cpu_only_and_accepts(flags):
        os.environ["XLA_FLAGS"] = flags


_use_fast_compile_flags()  # before jax starts its backend, which reads XLA_FLAGS once


def _has_gpu() -> bool:
    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:
        return False


# The longest test modules first, the longest of all leading (CPU-seconds, 2-core VM, from
# JAXSIM_TEST_PROFILE at b0b5ee3; every module of 8 CPU-s or more). With `--dist loadfile` a
# worker takes the next module when it is free, so the many short modules left at the end even
# out the two workers' finish. scripts/test.sh passes --no-loadscope-reorder (pytest-xdist 3.8,
# hence its pin): by default xdist orders modules by their number of tests, which left the
# 117 CPU-s clone smoke run of test_bench_publish (7 tests) near the end, and one worker
# finished 75 CPU-s after the other (654 and 579). A module not named here runs after these,
# in collection order.
LONGEST_FIRST = (
    "benchmarks/test_bench_publish.py",
    "jaxsim/test_adapters.py",
    "jaxsim/test_sharding.py",
    "jaxsim/test_rollout.py",
    "jaxsim/envs/test_envs.py",
    "jaxsim/fused/test_fused.py",
    "jaxsim/envs/test_minatar.py",
    "jaxsim/envs/test_swarm.py",
    "jaxsim/envs/test_minatar_obs_dtype.py",
    "jaxsim/envs/test_minatar_si_seaquest.py",
    "agents/test_offpolicy.py",
    "agents/test_train_chunks.py",
    "jaxsim/test_gymnasium.py",
    "agents/test_ppo.py",
    "jaxsim/test_params.py",
    "jaxsim/test_default_xla.py",
    "jaxsim/test_checks.py",
    "jaxsim/test_check_env.py",
    "test_guide.py",
    "jaxsim/profiler/test_profile.py",
    "agents/test_sweep.py",
    "jaxsim/test_gymnax_view.py",
    "agents/test_pqn.py",
    "agents/test_minatar_agents.py",
    "benchmarks/test_benchmarks.py",
    "agents/test_domain_randomisation.py",
    "agents/test_ppo_rnn.py",
    "test_ppo_single_file.py",
    "agents/test_ppo_cnn.py",
    "jaxsim/test_cpu_threads.py",
    "jaxsim/test_gymnasium_vector.py",
    "benchmarks/test_benchmarks_floor.py",
    "jaxsim/test_reuse.py",
)


def _longest_first(items) -> None:
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    tests = os.path.dirname(os.path.abspath(__file__))

    def key(item) -> int:
        module = os.path.relpath(str(item.path), tests).replace(os.sep, "/")
        return rank.get(module, len(rank))

    items.sort(key=key)  # stable: a module's tests keep their order


def pytest_collection_modifyitems(config, items):
    _longest_first(items)
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a GPU; jax sees none on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# One persistent compilation cache for the whole run: the test processes (both xdist workers) and
# every train command they start (JAXSIM_COMPILATION_CACHE is that command's folder) share a
# folder made for the run and removed after it, so nothing is written outside it. A program a
# module compiled again after the modules before it dropped theirs (below), or another process
# compiled already, is loaded from disk: tests/agents, tests/jaxsim/envs, test_rollout and
# test_checks (-n 2, quiet 2-core VM) took 362 s and 662 CPU-s with it, 403 s and 748 without.
# Loads go through agents.compile_cache (atomic writes: two workers share entries safely); the
# cached executable is the one XLA would build, keyed by the program and the XLA flags.
# JAXSIM_TEST_COMPILATION_CACHE=off runs the suite without it.
_CACHE_OWNER = "PYTEST_XDIST_WORKER" not in os.environ and "JAXSIM_TEST_CACHE_DIR" not in os.environ
if os.environ.get("JAXSIM_TEST_COMPILATION_CACHE", "").lower() in ("off", "0", "no", "false"):
    os.environ["JAXSIM_COMPILATION_CACHE"] = "off"
else:
    if _CACHE_OWNER:  # the run's first process; workers and subprocesses inherit the folder
        os.environ["JAXSIM_TEST_CACHE_DIR"] = tempfile.mkdtemp(prefix="jaxsim-test-xla-")
        atexit.register(shutil.rmtree, os.environ["JAXSIM_TEST_CACHE_DIR"], True)
    os.environ["JAXSIM_COMPILATION_CACHE"] = os.environ["JAXSIM_TEST_CACHE_DIR"]
    from agents import compile_cache

    compile_cache.enable(os.environ["JAXSIM_TEST_CACHE_DIR"])


# JAXSIM_TEST_PROFILE=FILE appends one line per test and one per test module to FILE: wall and CPU
# seconds (subprocesses' included), the number and seconds of XLA compiles and, per module, the
# peak resident memory of the process while it ran (VmHWM, reset at the module's start). Where a
# suite's time and memory go; CPU seconds and compile counts hold up on a loaded machine.
_PROFILE = os.environ.get("JAXSIM_TEST_PROFILE")
_compiles = [0, 0.0]  # this module's, then this test's: count and seconds
if _PROFILE:

    def _count_compile(event, seconds, **_):
        if event == "/jax/core/compile/backend_compile_duration":
            _compiles[0] += 1
            _compiles[1] += seconds

    jax.monitoring.register_event_duration_secs_listener(_count_compile)


def _malloc_trim() -> None:
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # glibc only; elsewhere nothing to do
    except (OSError, AttributeError):
        pass


def _cpu_seconds() -> float:
    times = os.times()  # this process's and its finished subprocesses' CPU time
    return times.user + times.system + times.children_user + times.children_system


def _status_mb(field: str) -> float:
    """A size from /proc/self/status (Linux): VmRSS (resident now), VmHWM (its peak)."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(f"{field}:"))
    return int(line.split()[1]) / 1024


def _drop_programs() -> None:
    jax.clear_caches()
    # Dropped executables free their memory to malloc, not to the system: a worker carried
    # ~0.7 GB from test_swarm into test_checks (1.5 GB peak there, 0.84 GB when run alone).
    # Handing the free pages back starts each module near the process's base size.
    gc.collect()
    _malloc_trim()


# Within a module, tests share compiled programs; a module whose programs are large (brax's
# pipelines beside gymnax's games) grew a worker by 1.9 GB, to 2.2 GB. Once a module has grown
# the worker by this much, a test's programs are dropped when it ends, at the price of
# recompiling what the next test shares (test_adapters then peaks at 1.3 GB; the four largest
# modules take 2% more CPU).
GROWTH_LIMIT_MB = float(os.environ.get("JAXSIM_TEST_GROWTH_LIMIT_MB", 600))
_module_start_mb = [0.0]


@pytest.fixture(autouse=True)
def _bound_memory():
    yield
    if sys.platform == "linux" and _status_mb("VmRSS") > _module_start_mb[0] + GROWTH_LIMIT_MB:
        _drop_programs()


@pytest.fixture(autouse=True, scope="module")
def _drop_compiled_programs(request):
    if sys.platform == "linux":
        _module_start_mb[0] = _status_mb("VmRSS")
    if _PROFILE:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")  # resets VmHWM to the current resident size
        _compiles[:] = [0, 0.0]
        start, cpu = time.perf_counter(), _cpu_seconds()
    yield
    # Each module compiles its own programs; keeping every module's executables alive made the
    # test process reach 6-7 GB. Dropping them between modules keeps it near one module's worth.
    _drop_programs()
    if _PROFILE:
        seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
        with open(_PROFILE, "a") as out:
            out.write(
                f"{request.module.__name__}\t{seconds:.1f}\t{cpu:.1f}\t{_status_mb('VmHWM'):.0f}\t"
                f"{_compiles[0]}\t{_compiles[1]:.1f}\t{os.getpid()}\n"
            )


if _PROFILE:

    @pytest.fixture(autouse=True)
    def _profile_test(request):
        before, start, cpu = list(_compiles), time.perf_counter(), _cpu_seconds()
        yield
        seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
        with open(_PROFILE, "a") as out:
            out.write(
                f"  {request.node.nodeid}\t{seconds:.1f}\t{cpu:.1f}\t-\t"
                f"{_compiles[0] - before[0]}\t{_compiles[1] - before[1]:.1f}\t{os.getpid()}\n"
            )
