"""The loops the minatar suite times, each stepping one MinAtar game with a random policy and
keeping every step's observation, reward and done flag.

A JAX loop is a call of no arguments that steps `num_envs` environments `steps` times inside one
jit, continuing from where its previous call stopped (episodes straddle calls, as in training),
and returns (obs [steps, N, 10, 10, C], reward [steps, N], done [steps, N]). Only the last
call's outputs are kept (a call's observations are up to a gigabyte at 4096 environments);
`check_outputs` reads them after the timing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

import jaxsim
from benchmarks.harness.gymnax_scan import discrete_policy, gymnax_scan
from benchmarks.harness.optional import require
from benchmarks.harness.timing import chained
from jaxsim.envs.adapters import strong_types

# Game -> (jaxsim's native id, gymnax's id, the original's Gymnasium id, channels).
GAMES = {
    "Breakout": ("MinAtar/Breakout-v0", "Breakout-MinAtar", "MinAtar/Breakout-v0", 4),
    "Asterix": ("MinAtar/Asterix-v0", "Asterix-MinAtar", "MinAtar/Asterix-v0", 4),
    "Freeway": ("MinAtar/Freeway-v0", "Freeway-MinAtar", "MinAtar/Freeway-v0", 7),
    "SpaceInvaders": (
        "MinAtar/SpaceInvaders-v0",
        "SpaceInvaders-MinAtar",
        "MinAtar/SpaceInvaders-v0",
        6,
    ),
    "Seaquest": ("MinAtar/Seaquest-v0", "Seaquest-MinAtar", "MinAtar/Seaquest-v0", 10),
}
KEPT = ("obs", "reward", "terminated", "truncated")


def jaxsim_loop(
    env_id: str, num_envs: int, steps: int, backend="scan", keep_obs=True, reuse=False
) -> Callable[[], Any]:
    """`jaxsim.rollout(jaxsim.make(env_id), ...)` on `backend`, keeping observations, chained
    through `final_state`: the public call, its checks included. Serves the native games (scan
    or fused) and the gymnax adapter ("gymnax/<id>", scan) alike. The fused kernel runs only
    jaxsim's own policies: there the random policy is `jaxsim.random_policy` (counter-based
    uniform actions), elsewhere `discrete_policy`, as in gymnax's loop. Without `keep_obs`
    the call returns None for the observations and keeps rewards and flags only. With `reuse`
    (scan) each call writes into the previous call's trajectory, `rollout(..., out=previous)`
    (its buffers donated: a training loop that is done with last chunk's outputs), starting
    from one fresh rollout made here, so every timed call is the same `out=` program."""
    env = jaxsim.make(env_id)
    if backend == "fused":
        policy = jaxsim.random_policy(env)
    else:
        policy = discrete_policy(env.action_space(env.default_params).n)
    keys = jax.random.split(jax.random.key(0), num_envs)
    state, _ = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys, env.default_params)
    # gymnax's Freeway resets `pos` weakly typed where its step gives int32: fixed types keep
    # the chained calls at one compile.
    state = strong_types(state)

    outputs = KEPT if keep_obs else "rewards"

    def step_call(state, key):
        traj = jaxsim.rollout(
            env, policy, steps, num_envs=num_envs, key=key, state=state,
            outputs=outputs, backend=backend,
        )  # fmt: skip
        return traj.final_state, (traj.obs, traj.reward, traj.terminated | traj.truncated)

    if not reuse:
        return chained(step_call, state)
    if backend != "scan":
        raise ValueError(f"jaxsim_loop: reuse (out=) runs on the scan backend, got {backend!r}")

    def reuse_call(previous, key):
        traj = jaxsim.rollout(
            env, policy, steps, num_envs=num_envs, key=key, state=previous.final_state,
            outputs=outputs, backend=backend, out=previous,
        )  # fmt: skip
        return traj, (traj.obs, traj.reward, traj.terminated | traj.truncated)

    first = jaxsim.rollout(
        env, policy, steps, num_envs=num_envs, key=jax.random.key(0), state=state,
        outputs=outputs, backend=backend,
    )  # fmt: skip
    return chained(reuse_call, first)


def gymnax_loop(name: str, num_envs: int, steps: int, keep_obs=True) -> Callable[[], Any]:
    """gymnax's own loop (`harness.gymnax_scan`), its observations kept (or, without
    `keep_obs`, None)."""

    def kept(obs, reward, terminated, truncated):
        return (obs if keep_obs else None, reward, terminated | truncated)

    run, carry = gymnax_scan(name, num_envs, steps, kept)
    return chained(run, carry)


def original_loop(gym_id: str, num_envs: int, steps: int) -> Callable[[], Any]:
    """The original `minatar` package through Gymnasium: a SyncVectorEnv of `num_envs`
    `gym_id` environments (registered by `minatar.gym.register_envs()`), uniform random actions
    from numpy, every step's observations kept. Its default NEXT_STEP auto-reset spends a step
    per episode on the reset; those steps count, as Gymnasium counts them."""
    gym = require("gymnasium")
    require("minatar.gym").register_envs()
    envs = gym.make_vec(gym_id, num_envs=num_envs, vectorization_mode="sync")
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    n = int(envs.single_action_space.n)

    def call():
        obs = np.empty((steps, *envs.observation_space.shape), np.bool_)
        rewards = np.empty((steps, num_envs), np.float32)
        dones = np.empty((steps, num_envs), np.bool_)
        for t in range(steps):
            obs[t], rewards[t], terminated, truncated, _ = envs.step(rng.integers(0, n, num_envs))
            dones[t] = terminated | truncated
        return obs, rewards, dones

    return call


def check_outputs(name: str, out, steps: int, num_envs: int, channels: int) -> dict[str, Any]:
    """Raises AssertionError naming `name` unless `out` is (obs [steps, N, 10, 10, C] of 0/1
    cells or None where not kept, finite rewards [steps, N], done flags [steps, N]); returns
    what was seen."""
    reward, done = (np.asarray(x) for x in out[1:])
    if reward.shape != (steps, num_envs) or not np.isfinite(reward).all():
        raise AssertionError(f"{name}: rewards {reward.shape} not finite, or not [steps, N]")
    if done.shape != (steps, num_envs):
        raise AssertionError(f"{name}: done flags of shape {done.shape}, expected [steps, N]")
    seen = {
        "pass": True,
        "reward_per_step": float(reward.mean()),
        "episodes_ended": int(done.sum()),
    }
    if out[0] is None:
        return seen | {"obs_shape": None}
    obs = np.asarray(out[0])
    want = (steps, num_envs, 10, 10, channels)
    if obs.shape != want:
        raise AssertionError(f"{name}: observations of shape {obs.shape}, expected {want}")
    values = np.unique(obs.astype(np.float32))
    if not np.isin(values, (0.0, 1.0)).all():
        raise AssertionError(f"{name}: observation cells other than 0 and 1: {values[:8]}")
    cells_on = float(obs.astype(np.float32).mean())
    return seen | {"obs_shape": list(obs.shape), "obs_dtype": str(obs.dtype), "cells_on": cells_on}
