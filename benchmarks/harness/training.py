"""A training run to a target, timed as the time-to-solve figures need it: `agents.loop.run_chunks`
(stop checks between chunks, each seed frozen once an independent evaluation confirms it), a
curve point after every chunk, and the checks' time taken out of the training time."""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Callable
from typing import Any

from agents.loop import ChunkReport, run_chunks
from benchmarks.harness.timing import CompileWatcher


def training_compile_s(watch: CompileWatcher) -> float:
    """Compile seconds of what training time counts: init and the loop, not the checks' (their
    evaluations and the fold_in of their keys, `agents.loop.check_keys`, compile in the checks'
    time, which is taken out)."""
    checks = ("evaluate", "fold_in")
    return watch.seconds_of(lambda name: not any(c in name for c in checks))


@dataclasses.dataclass
class TimedRun:
    runner: Any
    solved: list[int | None]  # per seed, the update at which it was solved (None: not)
    curve: list[dict[str, Any]]  # a point per chunk: what `point` adds, then the clocks
    watch: CompileWatcher  # every trace, lowering and compile in the run
    loop_compile_s: float  # the training loop's (the jitted `run`), inside the training time
    check_wall_s: float  # the stop checks and their confirmations
    check_cpu_s: float

    @property
    def compile_s(self) -> float:
        return self.watch.seconds or 0.0

    @property
    def end(self) -> dict[str, Any]:
        return self.curve[-1]


def train_to_target(
    make_agent: Callable[[], Any],
    keys,
    target: float | None,
    *,
    chunk: int,
    seed: int = 0,
    point: Callable[[ChunkReport, int], dict[str, Any]] | None = None,
    precompile: bool = False,
    one_seed_at_a_time: bool = False,
    compile_s: Callable[[CompileWatcher], float] = lambda watch: watch.seconds or 0.0,
) -> TimedRun:
    """Builds the agent (nothing compiled in memory), initialises a runner per key and trains
    every seed to `target` in chunks of `chunk` updates (`run_chunks`' `one_seed_at_a_time`
    passed on). With `precompile`, init and the loop compile side by side first, as the train
    command does (the evaluation's compile stays in the first stop check).

    Each curve point: `step` (env steps per seed), `point(report, step)`'s fields, `wall_s`
    (since the start), `train_wall_s` and `train_cpu_s` (the checks taken out, compiles left
    in), `compile_s(watch)` so far (default: every compile) and the 1-minute `load`.
    """
    curve: list[dict[str, Any]] = []
    checks = {"wall_s": 0.0, "cpu_s": 0.0}
    t_start, cpu_start = time.perf_counter(), time.process_time()

    with CompileWatcher() as watch:
        agent = make_agent()
        steps_per_update = agent.config.steps_per_update

        def on_chunk(report: ChunkReport) -> None:
            now, cpu = time.perf_counter(), time.process_time()
            checks["wall_s"] += report.eval_s
            checks["cpu_s"] += report.eval_cpu_s
            step = report.done * steps_per_update
            curve.append(
                {
                    "step": step,
                    **(point(report, step) if point else {}),
                    "wall_s": now - t_start,
                    "train_wall_s": now - t_start - checks["wall_s"],
                    "train_cpu_s": cpu - cpu_start - checks["cpu_s"],
                    "compile_s": compile_s(watch),
                    "load": os.getloadavg()[0],
                }
            )

        if precompile:
            loop_chunk = (min(chunk, agent.config.num_updates),)
            agent.precompile(len(keys), loop_chunk, run_seeds=1 if one_seed_at_a_time else None)
        runner = agent.jit_init()(keys)
        runner, solved = run_chunks(
            agent,
            runner,
            agent.config.num_updates,
            chunk=chunk,
            seed=seed,
            target=target,
            on_chunk=on_chunk,
            one_seed_at_a_time=one_seed_at_a_time,
        )
    loop = sum(v for k, v in watch.by_function.items() if re.search(r"\brun\b", k))
    return TimedRun(runner, solved, curve, watch, loop, checks["wall_s"], checks["cpu_s"])
