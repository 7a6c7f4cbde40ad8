"""The baselines in the rollout-throughput suite: Gymnasium (sync, async, numpy-vectorized),
EnvPool, gymnax and eager PyTorch, each stepped with random actions, checked, then timed."""

from __future__ import annotations

import functools
import itertools
import os
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.baselines import torch_cartpole as baselines
from benchmarks.harness.optional import Skipped, require
from benchmarks.harness.timing import time_fn
from benchmarks.rollout_throughput.config import Config, Measured, observation_size, record_check


# ------------------------------------------------------------------------------ (b, c) Gymnasium
def _check_vector_plumbing(gym, envs, env_id: str, num_envs: int, checks) -> None:
    """The first few envs of a freshly reset (seed 0) vector env step exactly as single
    `gym.make` envs reset with seeds 0, 1, ... under the same actions (no episode ends in 5)."""
    k = min(num_envs, 4)
    singles = [gym.make(env_id) for _ in range(k)]
    rng = np.random.default_rng(1)
    worst = 0.0
    for i, env in enumerate(singles):
        env.reset(seed=i)
    for _ in range(5):
        actions = baselines.random_actions(envs, rng, num_envs)
        obs, *_ = envs.step(actions)
        for i, env in enumerate(singles):
            single_obs, *_ = env.step(int(actions[i]) if actions.ndim == 1 else actions[i])
            worst = max(worst, float(np.abs(obs[i] - single_obs).max()))
    for env in singles:
        env.close()
    record_check(checks, "matches_single_envs", worst == 0.0, worst)


def _check_observations(checks: dict[str, Any], obs: np.ndarray, shape: tuple) -> None:
    record_check(checks, "obs_shape", obs.shape == shape, obs.shape)
    record_check(checks, "obs_finite", bool(np.isfinite(obs).all()))


def bench_gymnasium_vector(
    make_envs: Callable[[], Any], env_id: str, num_envs: int, cfg: Config, plumbing: bool = True
) -> Measured:
    gym = require("gymnasium")
    t0 = time.perf_counter()
    envs = make_envs()
    envs.reset(seed=0)
    setup_s = time.perf_counter() - t0
    steps = max(1, cfg.gymnasium_steps_per_call // num_envs)
    rng = np.random.default_rng(0)
    checks: dict[str, Any] = {}
    obs_dim = observation_size(env_id)

    def verify(out):
        obs, _, count = out
        _check_observations(checks, obs, (num_envs, obs_dim))
        record_check(checks, "steps_executed", count == steps * num_envs, count)

    try:
        if plumbing:
            _check_vector_plumbing(gym, envs, env_id, num_envs, checks)

        def call():
            done, count = 0, 0
            for _ in range(steps):
                obs, reward, terminated, truncated, _ = envs.step(
                    baselines.random_actions(envs, rng, num_envs)
                )
                done += int(np.count_nonzero(terminated | truncated))
                count += reward.shape[0]
            return obs, done, count

        timing = time_fn(call, repeats=cfg.repeats, min_time=cfg.min_time, check=verify)
    finally:
        envs.close()
    return Measured(timing, steps * num_envs, checks, setup_s=setup_s)


def bench_gymnasium_sync(env_id: str, num_envs: int, cfg: Config) -> Measured:
    gym = require("gymnasium")
    if num_envs > cfg.sync_max_envs:
        raise Skipped(f"num_envs > {cfg.sync_max_envs}: one Python env per instance, far too slow")
    return bench_gymnasium_vector(
        lambda: gym.vector.SyncVectorEnv([functools.partial(gym.make, env_id)] * num_envs),
        env_id,
        num_envs,
        cfg,
    )


def bench_gymnasium_async(env_id: str, num_envs: int, cfg: Config) -> Measured:
    gym = require("gymnasium")
    if num_envs > cfg.async_max_envs:
        raise Skipped(
            f"num_envs > {cfg.async_max_envs}: one process per env on "
            f"{os.cpu_count()} cores measures contention, not the simulator"
        )
    # forkserver: forking this process, whose XLA runtime is multithreaded, is unsafe.
    return bench_gymnasium_vector(
        lambda: gym.vector.AsyncVectorEnv(
            [functools.partial(gym.make, env_id)] * num_envs, context="forkserver"
        ),
        env_id,
        num_envs,
        cfg,
    )


def bench_gymnasium_numpy(env_id: str, num_envs: int, cfg: Config) -> Measured:
    gym = require("gymnasium")
    if env_id != "CartPole-v1":
        raise Skipped(f"Gymnasium has no numpy-vectorized {env_id} (CartPole-v1 only)")
    # It resets inside `step` on its own generator: no single-env plumbing to compare with.
    return bench_gymnasium_vector(
        lambda: gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point"),
        env_id,
        num_envs,
        cfg,
        plumbing=False,
    )


# ----------------------------------------------------------------------------------- (d) EnvPool
def bench_envpool(env_id: str, num_envs: int, cfg: Config) -> Measured:
    t0 = time.perf_counter()
    envs = baselines.make_envpool(env_id, num_envs)
    envs.reset()
    setup_s = time.perf_counter() - t0
    steps = max(1, cfg.gymnasium_steps_per_call // num_envs)
    rng = np.random.default_rng(0)
    checks: dict[str, Any] = {}
    obs_dim = observation_size(env_id)

    def verify(out):
        obs, env_ids = out
        _check_observations(checks, obs, (num_envs, obs_dim))
        # Synchronous mode (batch_size == num_envs): every env answers every step.
        record_check(checks, "all_envs_stepped", sorted(env_ids.tolist()) == list(range(num_envs)))

    def call():
        for _ in range(steps):
            obs, _, _, _, info = envs.step(baselines.random_actions(envs, rng, num_envs))
        return obs, info["env_id"]

    try:
        timing = time_fn(call, repeats=cfg.repeats, min_time=cfg.min_time, check=verify)
    finally:
        envs.close()
    notes = {"num_threads": envs.config.get("num_threads"), "threads_0_means": "hardware"}
    return Measured(timing, steps * num_envs, checks, setup_s=setup_s, notes=notes)


# ------------------------------------------------------------------------------------ (e) gymnax
def _gymnax_rollout(env, params, num_envs: int, n: int):
    """jit(scan(vmap(step))) as people run gymnax: a key per env per step, auto-reset step."""
    space = env.action_space(params)

    def sample(key):
        # One draw for the whole batch's actions (cheaper than a key per env, as a policy's
        # sampler would do); gymnax's step needs a key per environment.
        if hasattr(space, "n"):
            return jax.random.randint(key, (num_envs,), 0, space.n)
        shape = (num_envs, *space.shape)
        return jax.random.uniform(key, shape, minval=space.low, maxval=space.high)

    def run(key):
        key, k_reset = jax.random.split(key)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(k_reset, num_envs), params
        )

        def body(carry, _):
            obs, state, key = carry
            key, k_act, k_step = jax.random.split(key, 3)
            action = sample(k_act)
            next_obs, state, reward, terminated, truncated, _ = jax.vmap(
                env.step, in_axes=(0, 0, 0, None)
            )(jax.random.split(k_step, num_envs), state, action, params)
            return (next_obs, state, key), (obs, action, reward, terminated | truncated)

        _, traj = jax.lax.scan(body, (obs, state, key), None, length=n)
        return traj

    return jax.jit(run)


def bench_gymnax(env_id: str, num_envs: int, cfg: Config) -> Measured:
    gymnax = require("gymnax")
    env, params = gymnax.make(env_id)
    n = min(cfg.gymnax_scan_steps, max(32, cfg.gymnax_max_steps_per_call // num_envs))
    run = _gymnax_rollout(env, params, num_envs, n)
    seeds = itertools.count(1)
    checks: dict[str, Any] = {}
    obs_dim = observation_size(env_id)

    def verify(traj):
        obs, _, reward, done = traj
        record_check(checks, "obs_shape", obs.shape == (n, num_envs, obs_dim), obs.shape)
        record_check(checks, "obs_finite", bool(jnp.isfinite(obs).all()))
        record_check(checks, "reward_shape", reward.shape == (n, num_envs), reward.shape)
        if env_id == "CartPole-v1":
            # gymnax pays 1 per step after a reset, so the total counts the steps executed.
            total = int(reward.sum())
            record_check(checks, "steps_executed", total == n * num_envs, total)
            episodes = int(done.sum())
            if episodes >= 20:
                mean = n * num_envs / episodes
                record_check(checks, "mean_episode_length", 15 <= mean <= 35, round(mean, 2))

    timing = time_fn(
        lambda: run(jax.random.key(next(seeds))),
        repeats=cfg.repeats,
        min_time=cfg.min_time,
        check=verify,
    )
    compiles = timing.compiles_during_timing
    record_check(checks, "no_compile_while_timing", compiles == 0, compiles)
    return Measured(timing, n * num_envs, checks)


# ------------------------------------------------------------------------- (f) eager PyTorch
def bench_torch(env_id: str, num_envs: int, cfg: Config) -> Measured:
    torch = require("torch")
    if env_id != "CartPole-v1":
        raise Skipped(f"the eager PyTorch baseline implements CartPole-v1 only, not {env_id}")
    t0 = time.perf_counter()
    sim = baselines.TorchCartPole(num_envs, seed=0)
    steps = max(16, min(1024, cfg.torch_steps_per_call // num_envs))
    # A rollout buffer as PyTorch PPO code keeps one (cleanrl's ppo.py): every step recorded.
    buffers = {
        "obs": torch.zeros((steps, num_envs, 4)),
        "action": torch.zeros((steps, num_envs), dtype=torch.int64),
        "reward": torch.zeros((steps, num_envs)),
        "done": torch.zeros((steps, num_envs), dtype=torch.bool),
    }
    setup_s = time.perf_counter() - t0
    checks: dict[str, Any] = {}
    threads_before = torch.get_num_threads()
    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)

    def call():
        with torch.inference_mode():
            obs = sim.state
            for t in range(steps):
                action = sim.random_actions()
                buffers["obs"][t] = obs
                obs, reward, terminated, truncated, _ = sim.step(action)
                buffers["action"][t] = action
                buffers["reward"][t] = reward
                buffers["done"][t] = terminated | truncated
        return buffers

    def verify(out):
        total = int(out["reward"].sum())
        record_check(checks, "steps_executed", total == steps * num_envs, total)
        record_check(checks, "obs_finite", bool(torch.isfinite(out["obs"]).all()))
        episodes = int(out["done"].sum())
        # Only over a horizon much longer than an episode (~22 steps) does steps / episodes
        # estimate the episode length; shorter calls are covered by the dynamics check.
        if steps >= 256 and episodes >= 20:
            mean = steps * num_envs / episodes
            record_check(checks, "mean_episode_length", 15 <= mean <= 35, round(mean, 2))

    try:
        timing = time_fn(call, repeats=cfg.repeats, min_time=cfg.min_time, check=verify)
        notes = {"torch_threads": torch.get_num_threads(), "device": "cpu", "mode": "eager"}
    finally:
        torch.set_num_threads(threads_before)
    return Measured(timing, steps * num_envs, checks, setup_s=setup_s, notes=notes)
