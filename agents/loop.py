"""The host loop of a multi-seed run: jitted chunks of updates; reports and stop checks between.

Progress is read from each chunk's returned `Metrics` instead of a host callback inside the
jitted loop, so the loop holds no callback and JAX's persistent compilation cache can store it
(`jaxsim.compile_cache`). With a target return, every chunk ends with a deterministic evaluation
of each seed (`Agent.evaluate`); a seed whose mean return reaches the target is solved and frozen
there (its later updates are discarded, as Stable-Baselines3's StopTrainingOnRewardThreshold
keeps the model that reached it), and the run stops once every seed is solved. Chunk boundaries
change nothing in the result: `run(run(s, k), n - k)` equals `run(s, n)` bit for bit.
"""

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
from agents.structs import Metrics


def check_keys(seed: int, num_seeds: int, update: int) -> jax.Array:
    """Keys of the stop check after `update` updates: one per seed, apart from the final
    evaluation's (`agents.play.evaluation_keys`), and the same on a resumed run."""
    key = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), 2), update)
    return jax.random.split(key, num_seeds)


@dataclasses.dataclass
class ChunkReport:
    """What the host knows after a chunk; arrays have a leading [num_seeds] axis."""

    done: int  # updates done by the loop (frozen seeds stopped earlier)
    runner: Any  # every seed's runner state, frozen seeds as they were when solved
    metrics: Metrics  # numpy; each seed's latest update (a frozen seed's last before it froze)
    eval_returns: np.ndarray | None  # float[num_seeds] mean returns of this check; None: no target
    solved_update: list[int | None]  # per seed, the update count at which it reached the target
    eval_s: float = 0.0  # wall seconds of this chunk's stop check (its compile included)
    eval_cpu_s: float = 0.0  # this process's CPU seconds in it


def _where(mask: np.ndarray, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    return np.where(mask.reshape(mask.shape + (1,) * (np.ndim(new) - 1)), old, new)


@jax.jit
def _keep_frozen(frozen: jax.Array, old, new):
    def pick(o, n):
        return jnp.where(frozen.reshape(frozen.shape + (1,) * (n.ndim - 1)), o, n)

    return jax.tree.map(pick, old, new)


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
):
    """Runs the stacked `runner` to `num_updates` updates in chunks; stops early once every seed
    is solved. Returns (runner, solved_update).

    Args:
      agent: any `Agent`; its `jit_run(n)` runs one chunk for every seed at once.
      runner: the agent's runner state with a leading [num_seeds] axis.
      num_updates: the run's length in updates (the loop resumes from the runner's update count).
      chunk: updates between reports (and stop checks).
      seed: the run's base seed; stop checks draw their keys from it (`check_keys`).
      target: mean deterministic evaluation return at which a seed counts as solved; None: no
        checks, the run goes to `num_updates`.
      solved_update: per seed, the update at which an earlier part of the run solved it (None:
        not yet); from a checkpoint when resuming.
      boundary: chunks also end at multiples of this many updates (checkpoints), if given.
      on_chunk: called on the host after every chunk with a `ChunkReport`.
    """
    for name, value in (("chunk", chunk), ("boundary", boundary or 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"run_chunks: {name} must be a positive integer, got {value!r}")
    num_seeds = int(np.shape(runner.update)[0])
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
        new, metrics = agent.jit_run(n)(runner)
        done += n
        latest = jax.tree.map(lambda x: np.asarray(x)[:, -1], metrics)
        returns, t0, cpu0 = None, time.perf_counter(), time.process_time()
        if target is not None:
            keys = check_keys(seed, num_seeds, done)
            returns = np.asarray(agent.jit_evaluate()(new, keys)).mean(axis=1)
        eval_s, eval_cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
        if frozen.any():
            new = _keep_frozen(jnp.asarray(frozen), runner, new)
            if last is not None:  # (a resumed run has no earlier chunk to show)
                latest = jax.tree.map(functools.partial(_where, frozen), last, latest)
            if returns is not None and last_returns is not None:
                returns = np.where(frozen, last_returns, returns)
        if returns is not None:
            for s in np.flatnonzero(~frozen & (returns >= target)):
                solved_update[s] = done
            frozen = np.array([u is not None for u in solved_update])
        runner, last, last_returns = new, latest, returns
        if on_chunk is not None:
            report = ChunkReport(
                done, runner, latest, returns, list(solved_update), eval_s, eval_cpu_s
            )
            on_chunk(report)
    return runner, solved_update
