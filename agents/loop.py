"""The host loop of a multi-seed run: jitted chunks of updates; reports and stop checks between.

Progress is read from each chunk's returned `Metrics` instead of a host callback inside the
jitted loop, so the loop holds no callback and JAX's persistent compilation cache can store it
(`agents.compile_cache`). With a target return, every chunk ends with a deterministic evaluation
of each seed (`Agent.evaluate`, the stop check). Solved means solved: a seed the stop check finds
at the target is solved only if an independent evaluation (`independent_evaluation`: at least
`MIN_EPISODES` episodes, keys apart from the stop check's, the run's final evaluation itself)
also reaches it (`confirmed`); otherwise it trains on. A solved seed is frozen there (its later
updates are discarded, as Stable-Baselines3's StopTrainingOnRewardThreshold keeps the model
that reached it), so the final evaluation in eval.json repeats the confirming one, and the run
stops once every seed is solved. Chunk boundaries change nothing in the result:
`run(run(s, k), n - k)` equals `run(s, n)` bit for bit."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from agents.agent import Agent
from agents.config import check_value
from agents.structs import Metrics

MIN_EPISODES = 32
"""Episodes per seed, at least, of the evaluation that confirms a seed solved (and of eval.json)."""


def check_keys(seed: int, num_seeds: int, update: int, configs: int = 1) -> jax.Array:
    """Keys of the stop check after `update` updates: one per seed, apart from the final
    evaluation's (`evaluation_keys`), and the same on a resumed run. `configs`: a sweep's
    configurations, each with the same seeds' keys (rows configuration-major, `agents.sweep`)."""
    key = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), 2), update)
    return jnp.tile(jax.random.split(key, num_seeds), configs)


def evaluation_keys(seed: int, num_seeds: int, batch: int = 0, configs: int = 1) -> jax.Array:
    """Keys of batch `batch` of a run's final (and confirming) evaluation: one per seed, from
    the run's `--seed`; never one of the stop checks' (`check_keys`). `configs`: as there."""
    key = jax.random.fold_in(jax.random.key(seed), 1)
    if batch:  # batch 0 keeps the keys runs used before evaluations came in batches
        key = jax.random.fold_in(key, batch)
    return jnp.tile(jax.random.split(key, num_seeds), configs)


def evaluation_batches(eval_envs: int, min_episodes: int = MIN_EPISODES) -> int:
    """How many evaluations of `eval_envs` episodes make at least `min_episodes`."""
    return max(1, -(-min_episodes // eval_envs))


def independent_evaluation(
    agent: Agent,
    runner,
    seed: int,
    num_seeds: int,
    min_episodes: int = MIN_EPISODES,
    configs: int = 1,
) -> np.ndarray:
    """The deterministic evaluation that confirms a seed solved, and the run's final one.

    `evaluation_batches` calls of the agent's jitted evaluation (`config.eval_envs` episodes
    each, one compiled program shared with the stop checks), keys from `evaluation_keys`.
    `configs`: the runner holds a sweep's rows, `num_seeds` seeds per configuration.

    Returns:
      float32 [configs * num_seeds, episodes] returns, episodes = batches * eval_envs >=
      min_episodes.
    """
    evaluate = agent.jit_evaluate()
    batches = evaluation_batches(agent.config.eval_envs, min_episodes)
    parts = [evaluate(runner, evaluation_keys(seed, num_seeds, b, configs)) for b in range(batches)]
    return np.concatenate([np.asarray(p) for p in parts], axis=1)


def confirmed(check_return: float, independent_returns, target: float) -> bool:
    """The rule "solved means solved": a stop check's mean return `check_return` reached
    `target`, and so did the mean of `independent_returns`, the episodes of an independent
    deterministic evaluation (at least `MIN_EPISODES`, drawn apart from the stop check's).

    Any trainer can be judged by it: evaluate its model again that way and pass the returns.
    Raises a ValueError if fewer than `MIN_EPISODES` episodes are given.
    """
    returns = np.asarray(independent_returns, dtype=float).reshape(-1)
    if returns.size < MIN_EPISODES:
        raise ValueError(
            f"confirmed: independent_returns must hold >= {MIN_EPISODES} episodes, got "
            f"{returns.size}"
        )
    return bool(check_return >= target and returns.mean() >= target)


@dataclasses.dataclass
class ChunkReport:
    """What the host knows after a chunk; arrays have a leading [num_seeds] axis."""

    done: int  # updates done by the loop (frozen seeds stopped earlier)
    runner: Any  # every seed's runner state, frozen seeds as they were when solved
    metrics: Metrics  # numpy; each seed's latest update (a frozen seed's last before it froze)
    eval_returns: np.ndarray | None  # float[num_seeds] mean returns of this check; None: none ran
    # float[num_seeds] mean returns of the independent evaluation, NaN for seeds it did not
    # run on (only seeds the stop check found at the target are confirmed); None: none ran.
    confirm_returns: np.ndarray | None
    solved_update: list[int | None]  # per seed, the update count at which it reached the target
    eval_s: float = 0.0  # wall seconds of this chunk's stop check and confirmation (compiles in)
    eval_cpu_s: float = 0.0  # this process's CPU seconds in it


def _where(mask: np.ndarray, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    return np.where(mask.reshape(mask.shape + (1,) * (np.ndim(new) - 1)), old, new)


@jax.jit
def _keep_frozen(frozen: jax.Array, old, new):
    def pick(o, n):
        return jnp.where(frozen.reshape(frozen.shape + (1,) * (n.ndim - 1)), o, n)

    return jax.tree.map(pick, old, new)


def _run_seeds_apart(agent: Agent, runner, n: int, frozen: np.ndarray, last):
    """`n` updates of each unfrozen seed of the stacked `runner`, one seed per call of the
    single-seed `jit_run(n)` (one compiled program for every seed); frozen seeds are left as
    they are. Returns (runner, latest metrics [num_seeds]); a frozen seed's metrics are from
    `last` (zeros if there is none, as on a resumed run)."""
    seeds, latest = [], []
    for s in range(len(frozen)):
        one = jax.tree.map(lambda x: x[s : s + 1], runner)  # noqa: B023 (used at once)
        if frozen[s]:
            seeds.append(one)
            latest.append(None)
            continue
        one, metrics = agent.jit_run(n)(one)
        seeds.append(one)
        latest.append(jax.tree.map(lambda x: np.asarray(x)[:, -1], metrics))
    example = next(m for m in latest if m is not None)
    for s in np.flatnonzero(frozen):
        previous = jax.tree.map(np.zeros_like, example) if last is None else last
        latest[s] = jax.tree.map(lambda x: x[s : s + 1], previous)  # noqa: B023
    stack = functools.partial(jax.tree.map, lambda *xs: jnp.concatenate(xs))
    return stack(*seeds), jax.tree.map(lambda *xs: np.concatenate(xs), *latest)


def run_chunks(
    agent: Agent,
    runner,
    num_updates: int,
    *,
    chunk: int,
    seed: int = 0,
    target: float | None = None,
    solved_update: list[int | None] | None = None,
    boundary: int | None = None,
    on_chunk: Callable[[ChunkReport], None] | None = None,
    one_seed_at_a_time: bool = False,
    configs: int = 1,
):
    """Runs the stacked `runner` to `num_updates` updates in chunks; stops early once every seed
    is solved. Returns (runner, solved_update).

    Args:
      agent: any `Agent`; its `jit_run(n)` runs one chunk for every seed at once.
      runner: the agent's runner state with a leading [num_seeds] axis.
      num_updates: the run's length in updates (the loop resumes from the runner's update count).
      chunk: updates between stop checks (and progress reports): a check ends every
        multiple of `chunk` updates and the run.
      seed: the run's base seed; stop checks draw their keys from it (`check_keys`).
      target: mean deterministic evaluation return at which a seed counts as solved, in the
        stop check and in the independent evaluation that confirms it (`confirmed`); None: no
        checks, the run goes to `num_updates`.
      solved_update: per seed, the update at which an earlier part of the run solved it (None:
        not yet); from a checkpoint when resuming.
      boundary: chunks also end at multiples of this many updates (checkpoints), if given;
        such a chunk ends with no stop check, so `boundary` changes nothing in the result.
      on_chunk: called on the host after every chunk with a `ChunkReport` (`eval_returns` None
        after a chunk that ended at a `boundary` only).
      one_seed_at_a_time: run each chunk seed by seed through one single-seed program
        (`_run_seeds_apart`), skipping frozen seeds, instead of every seed vmapped at once. A
        run's cost then follows the seeds still training, not the slowest seed times all of
        them: on a CPU, vmap buys nothing here (SAC Pendulum: 3 seeds cost ~3x one), and a
        frozen seed's vmapped updates are computed and thrown away. Each update is the vmapped
        one up to float rounding (the programs round apart by an ulp), which a long run can
        grow into other trajectories (SAC Pendulum: seeds solved at 3k, 3k, 3k steps one at a
        time, 5k, 3k, 6k vmapped). Not for accelerators, where vmapped seeds run in parallel.
      configs: the runner holds the rows of a sweep (`agents.sweep.Swept`), `configs`
        configurations of the same seeds, configuration-major: every configuration's stop
        checks draw the keys its own run would. Each row is solved and frozen on its own.
    """
    check_value("run_chunks", "chunk", chunk, ge=1)
    if boundary:
        check_value("run_chunks", "boundary", boundary, ge=1)
    num_seeds = int(np.shape(runner.update)[0])
    check_value("run_chunks", "configs", configs, ge=1)
    if num_seeds % configs:
        raise ValueError(f"run_chunks: {num_seeds} rows are not {configs} configurations' seeds")
    seeds_per_config = num_seeds // configs
    solved_update = list(solved_update or [None] * num_seeds)
    if len(solved_update) != num_seeds:
        raise ValueError(
            f"run_chunks: solved_update has {len(solved_update)} entries for {num_seeds} seeds"
        )
    frozen = np.array([u is not None for u in solved_update])
    done = int(np.max(np.asarray(runner.update)))
    last, last_returns = None, None  # the previous chunk's, what a frozen seed keeps showing
    while done < num_updates and not (target is not None and frozen.all()):
        n = min(chunk - done % chunk, num_updates - done)
        if boundary:
            n = min(n, boundary - done % boundary)
        if one_seed_at_a_time and not frozen.all():
            new, latest = _run_seeds_apart(agent, runner, n, frozen, last)
        else:
            new, metrics = agent.jit_run(n)(runner)
            latest = jax.tree.map(lambda x: np.asarray(x)[:, -1], metrics)
        done += n
        returns, confirm, t0, cpu0 = None, None, time.perf_counter(), time.process_time()
        # Stop checks at multiples of `chunk` (and the end) only: a chunk cut short at a
        # `boundary` (a checkpoint) checks nothing, so the cadence of checkpoints changes nothing.
        if target is not None and (done % chunk == 0 or done == num_updates):
            keys = check_keys(seed, seeds_per_config, done, configs)
            returns = np.asarray(agent.jit_evaluate()(new, keys)).mean(axis=1)
            candidates = ~frozen & (returns >= target)
            if candidates.any():
                independent = independent_evaluation(
                    agent, new, seed, seeds_per_config, configs=configs
                )
                confirm = np.where(candidates, independent.mean(axis=1), np.nan)
                for s in np.flatnonzero(candidates):
                    if confirmed(returns[s], independent[s], target):
                        solved_update[s] = done
        eval_s, eval_cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
        if frozen.any():
            new = _keep_frozen(jnp.asarray(frozen), runner, new)
            if last is not None:  # (a resumed run has no earlier chunk to show)
                latest = jax.tree.map(functools.partial(_where, frozen), last, latest)
            if returns is not None and last_returns is not None:
                returns = np.where(frozen, last_returns, returns)
        frozen = np.array([u is not None for u in solved_update])
        runner, last = new, latest
        last_returns = last_returns if returns is None else returns
        if on_chunk is not None:
            report = ChunkReport(
                done, runner, latest, returns, confirm, list(solved_update), eval_s, eval_cpu_s
            )
            on_chunk(report)
    return runner, solved_update
