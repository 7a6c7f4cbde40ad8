"""jaxsim's time to a confirmed solve with an `agents.train` preset: the train command's loop."""

from __future__ import annotations

import os
from typing import Any

import jax

import jaxsim
from agents import compile_cache
from agents.algorithms import agent_type
from agents.presets import config_for, target_for
from benchmarks.harness.training import train_to_target


def solve_preset(
    algorithm: str,
    env_id: str,
    seeds: int,
    cache_dir: str,
    target: float,
    total_steps: int | None = None,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`seeds` seeds of `algorithm`'s preset for `env_id` trained at once with the train
    command's loop (`agents.loop.run_chunks`: a stop check every `log_every` updates, a seed
    solved only when an independent 32-episode evaluation confirms it) until every seed is
    solved or the budget ends, stopping at `target` (the preset's own where it has one).
    The compilation cache is `cache_dir` (empty: a cold run). Training time excludes the checks
    and includes the training loop's compile, reported apart (`loop_compile_s`); the
    environment is made before it, as rejax's is (an adapter's first make imports its library:
    2.9 s for gymnax). `overrides` are applied to the preset (recorded in `config`)."""
    cache = "warm" if os.listdir(compile_cache.enable(cache_dir)) else "cold"
    overrides = {**(overrides or {}), **({"total_steps": total_steps} if total_steps else {})}
    config = config_for(env_id, algorithm, **overrides)
    target = target_for(env_id, algorithm) or target

    def point(report, step) -> dict[str, Any]:
        return {
            "eval_return": report.eval_returns.tolist(),
            "solved": sum(u is not None for u in report.solved_update),
        }

    env = jaxsim.make(env_id)
    run = train_to_target(
        lambda: agent_type(algorithm)(config, env),
        jax.random.split(jax.random.key(0), seeds),
        target,
        chunk=config.log_every,
        point=point,
    )
    solved, end, loop = run.solved, run.end, run.loop_compile_s
    solved_all = all(u is not None for u in solved)
    return {
        "preset": f"agents.presets {algorithm} {env_id}",
        "config": config.to_dict(),
        "cache": cache,
        "seeds": seeds,
        "target": target,
        "solved": [u is not None for u in solved],
        "solved_all": solved_all,
        "per_seed_steps_to_target": [u and u * config.steps_per_update for u in solved],
        "train_wall_s": end["train_wall_s"],
        "train_wall_s_per_seed": end["train_wall_s"] / seeds,
        "compile_s": run.compile_s,
        "loop_compile_s": loop,
        "train_wall_s_per_seed_without_compile": (end["train_wall_s"] - loop) / seeds,
        "check_wall_s": run.check_wall_s,
        "curve": run.curve,
    }
