"""Timing jitted calls: compile apart from run time, warm-up discarded, interleaved repeats."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

from benchmarks.harness.paths import REPO_ROOT, child_env


class CompileWatcher:
    """Counts XLA compilations and the wall time spent tracing, lowering and compiling.

    Listens to `jax.monitoring` time spans; nested spans (a jit traced inside another's trace)
    are merged, so `seconds` never counts the same instant twice. It stays None on a jax that
    reports no such spans.
    """

    EVENTS = (
        "/jax/core/compile/jaxpr_trace_duration",
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        "/jax/core/compile/backend_compile_duration",
    )

    def __init__(self):
        self.compiles = 0
        self._spans: list[tuple[float, float]] = []
        self._active = False
        self.by_function: dict[str, float] = {}  # seconds per jitted function's name

    def _listener(self, event: str, start_time: float, end_time: float, **kwargs) -> None:
        if not self._active or event not in self.EVENTS:
            return
        name = str(kwargs.get("fun_name", "?"))
        self._spans.append((start_time, end_time, name))
        self.by_function[name] = self.by_function.get(name, 0.0) + end_time - start_time
        if event == self.EVENTS[-1]:
            self.compiles += 1

    @property
    def seconds(self) -> float | None:
        if not self._spans:
            return None
        return self.seconds_of(lambda name: True)

    def seconds_of(self, keep: Callable[[str], bool]) -> float:
        """Seconds covered by the spans of the functions whose name `keep` accepts, overlaps
        counted once (programs compiled side by side, `Agent.precompile`, overlap in time)."""
        total, covered_to = 0.0, -math.inf
        for start, end, _ in sorted(s for s in self._spans if keep(s[2])):
            start = max(start, covered_to)
            if end > start:
                total += end - start
                covered_to = end
        return total

    def __enter__(self) -> CompileWatcher:
        self._active = True
        jax.monitoring.register_event_time_span_listener(self._listener)
        return self

    def __exit__(self, *exc) -> None:
        self._active = False  # inert even where jax cannot unregister a listener
        unregister = getattr(jax.monitoring, "unregister_event_time_span_listener", None)
        if unregister is not None:
            unregister(self._listener)


@dataclasses.dataclass
class Timing:
    """What `time_fn` measured. Times are seconds per call of the timed function."""

    first_call_s: float  # the first call: trace + compile + one run
    first_call_cpu_s: float  # this process's CPU seconds in the first call (less load-sensitive)
    compile_s: float | None  # trace + lower + XLA compile inside the first call (jax.monitoring)
    compiles_during_timing: int  # XLA compilations after the first call: should be 0
    samples_s: list[float]  # one per repeat
    calls_per_repeat: list[int]
    cpu_over_wall: list[float]  # this process's CPU time / wall time, per repeat: load indicator
    last: Any = dataclasses.field(default=None, repr=False)  # the last call's output

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples_s)

    @property
    def min_s(self) -> float:
        return min(self.samples_s)

    @property
    def max_s(self) -> float:
        return max(self.samples_s)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("last")
        d.update(median_s=self.median_s, min_s=self.min_s, max_s=self.max_s)
        return d


def timed_point(name: str, timing: Timing, checks, **fields: Any) -> dict[str, Any]:
    """The point of a case timed and checked: `fields` (with "num_envs" and "steps", a call's
    env-steps), status "ok", env-steps/s, compile seconds, the timing and the `checks`. Raises
    AssertionError naming the case if anything compiled while it was timed."""
    if timing.compiles_during_timing:
        raise AssertionError(f"{name}: {timing.compiles_during_timing} compile(s) while timing")
    work = fields["num_envs"] * fields["steps"]
    return {
        **fields,
        "status": "ok",
        # env-steps/s of the median call, the slowest and the fastest
        "steps_per_s": {
            "median": work / timing.median_s,
            "min": work / timing.max_s,
            "max": work / timing.min_s,
        },
        "compile_s": timing.compile_s,
        "timing": timing.to_dict(),
        "checks": checks,
    }


def _first_call(fn: Callable[[], Any]) -> tuple[Any, float, float, float | None]:
    """(output, wall s, CPU s, compile s) of `fn`'s first call, blocked on."""
    with CompileWatcher() as first:
        c0, t0 = time.process_time(), time.perf_counter()
        out = jax.block_until_ready(fn())
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
    return out, wall, cpu, first.seconds


def _sample(fn: Callable[[], Any], min_time: float) -> tuple[Any, float, int, float]:
    """Calls `fn` until `min_time` has passed (at least once): (last output, seconds per call,
    calls, CPU / wall)."""
    count = 0
    c0, t0 = time.process_time(), time.perf_counter()
    while True:
        out = jax.block_until_ready(fn())
        count += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= min_time:
            break
    cpu = time.process_time() - c0
    return out, elapsed / count, count, round(cpu / elapsed, 3) if elapsed > 0 else math.nan


def time_fn(
    fn: Callable[[], Any],
    *,
    repeats: int = 3,
    min_time: float = 0.0,
    warmup: int = 1,
    check: Callable[[Any], None] | None = None,
) -> Timing:
    """Times `fn()`, blocking on its (JAX) outputs after every call.

    The first call is timed on its own (compile + first run); `warmup` more calls are discarded;
    then each of `repeats` samples calls `fn` until at least `min_time` seconds have passed (at
    least once) and records the seconds per call. For a new key (or other argument) each call,
    let `fn` close over a counter. `check`, if given, sees the first call's output before any
    timing and the last call's output after it; it raises to reject them.

    Args:
      fn: a function of no arguments; its outputs may be any pytree (non-JAX leaves are fine).
      repeats: number of samples (>= 1).
      min_time: minimum seconds per sample; 0 means one call per sample.
      warmup: untimed calls after the first one.
      check: a function of `fn`'s output that raises if the output is wrong.

    Returns:
      A `Timing`; `Timing.last` holds the last call's output for checking.
    """
    timings = time_interleaved(
        {"fn": fn}, repeats=repeats, min_time=min_time, warmup=warmup, check=check
    )
    return timings["fn"]


def time_interleaved(
    fns: dict[str, Callable[[], Any]],
    *,
    repeats: int = 3,
    min_time: float = 0.0,
    warmup: int = 1,
    check: Callable[[Any], None] | None = None,
) -> dict[str, Timing]:
    """`time_fn` of several functions whose samples take turns, so that load from other
    processes, which drifts, falls on each alike: their ratio is the figure to compare.

    Every function's first call (compile) and warmup come before any sample; round r then takes
    one sample of each, starting from function r mod len(fns) so none always goes first.
    `check` sees each function's first and last output.

    Returns:
      name -> `Timing`, the names in the order of `fns`.
    """
    if repeats < 1:
        raise ValueError(f"time_interleaved: repeats must be >= 1, got {repeats}")
    names = list(fns)
    first = {}
    for name in names:
        out, wall, cpu, compile_s = _first_call(fns[name])
        if check is not None:
            check(out)
        first[name] = (wall, cpu, compile_s)
    samples: dict[str, list] = {name: [] for name in names}
    last: dict[str, Any] = {}
    compiles = dict.fromkeys(names, 0)  # after the first call: should stay 0
    with CompileWatcher() as later:
        for name in names:
            before = later.compiles
            for _ in range(warmup):
                jax.block_until_ready(fns[name]())
            compiles[name] += later.compiles - before
        for r in range(repeats):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                before = later.compiles
                last[name], *sample = _sample(fns[name], min_time)
                samples[name].append(sample)
                compiles[name] += later.compiles - before
    timings = {}
    for name in names:
        if check is not None:
            check(last[name])
        wall, cpu, compile_s = first[name]
        timings[name] = Timing(
            first_call_s=wall,
            first_call_cpu_s=cpu,
            compile_s=compile_s,
            compiles_during_timing=compiles[name],
            samples_s=[s[0] for s in samples[name]],
            calls_per_repeat=[s[1] for s in samples[name]],
            cpu_over_wall=[s[2] for s in samples[name]],
            last=last[name],
        )
    return timings


def chained(step_call: Callable, carry) -> Callable[[], Any]:
    """A call of no arguments that runs `step_call(carry, key) -> (carry, out)` on a fresh key
    and keeps the carry for the next call: a loop that continues where its last call stopped
    (episodes straddle calls, as in training), as the timed loops run."""
    keys = itertools.count(1)
    holder = [carry]

    def call():
        holder[0], out = step_call(holder[0], jax.random.key(next(keys)))
        return out

    return call


def continued_rollout(env, policy, steps: int, start=None, **kwargs: Any) -> Callable[[], Any]:
    """A call of no arguments: `jaxsim.rollout(env, policy, steps, **kwargs)` from where the
    previous call stopped (its final state; the first call from `start`, None: a reset). The
    key stays: a new key per call would add an eager dispatch that is not part of the rollout."""
    import jaxsim

    carry = {"state": start}

    def call():
        out = jaxsim.rollout(env, policy, steps, state=carry["state"], **kwargs)
        carry["state"] = out.final_state
        return out

    return call


def time_process(cmd: list[str]) -> dict[str, Any]:
    """Runs `cmd` as a whole process from the repository (this checkout's packages first), as a
    user runs a command: its wall time, start to exit, and the 1-minute load average before and
    after (and its stdout). A failed process raises with the end of its stderr."""
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=child_env(), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return {"wall_s": wall, "load_1min_before": load_before, "load_1min_after": os.getloadavg()[0],
            "stdout": proc.stdout}  # fmt: skip


def train_command(algorithm: str, env_id: str, out: Path, cache: str, *flags: Any) -> list[str]:
    """The train command as a user types it, `python -m agents.train ALGORITHM --env ENV_ID
    FLAGS...` (the preset, its target unless the flags say otherwise), quiet, no plot, writing
    into `out`, its compilation cache in `cache`."""
    return [sys.executable, "-m", "agents.train", algorithm, "--env", env_id, *map(str, flags),
            "--no-plot", "--quiet", "--out", str(out), "--compilation-cache", cache]  # fmt: skip


def train_process(cmd: list[str], seeds: int, out: Path) -> dict[str, Any]:
    """One train process (`train_command`): its wall time (start to exit), per seed, and its
    eval.json's verdict (solved by `agents.loop.confirmed`: the stop check and the evaluation)."""
    from benchmarks.harness.commands import portable_command

    run = time_process(cmd)
    evaluation = json.loads((Path(out) / "eval.json").read_text())
    solved = evaluation["solved_per_seed"]
    return {
        "command": portable_command(cmd),
        "wall_s": run["wall_s"],
        "per_seed_wall_s": run["wall_s"] / seeds,
        "solved_per_seed": solved,
        "solved_all": all(solved),
        "steps_to_target_per_seed": evaluation["steps_to_target_per_seed"],
        "final_per_seed_mean_return": evaluation["per_seed_mean_return"],
        "load_before": run["load_1min_before"],
        "load_after": run["load_1min_after"],
    }
