"""gymnax's own loop, as its users write it: jit(scan(vmap(env.step))) with a key per
environment per step (gymnax's `step` computes a reset inside every step and selects); and the
random policies the JAX loops of a comparison share: (key, obs[N, ...]) -> actions [N, ...], one
draw per batch step, so that every loop of a pair samples its actions alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from benchmarks.harness.optional import require
from jaxsim.envs.adapters import strong_types


def uniform_policy(low, high, shape) -> Callable:
    """Uniform continuous actions [N, *shape] in [low, high]."""
    low, high = np.asarray(low, np.float32), np.asarray(high, np.float32)

    def policy(key, obs):
        return jax.random.uniform(key, (obs.shape[0], *shape), minval=low, maxval=high)

    return policy


def discrete_policy(n: int) -> Callable:
    """Uniform int32 actions [N] in [0, n)."""

    def policy(key, obs):
        return jax.random.randint(key, (obs.shape[0],), 0, n)

    return policy


def gymnax_scan(
    name: str, num_envs: int, steps: int, outputs: Callable, policy: Callable | None = None
) -> tuple[Callable, Any]:
    """gymnax's `name` stepped `num_envs` at a time, `steps` steps a call.

    Args:
      outputs: (obs, reward, terminated, truncated) of one batch step -> what the loop keeps of
        it; only that is written out, as a user's loop keeps only what it needs.
      policy: (key, obs[N, ...]) -> actions [N, ...]; None: uniform over the discrete actions.

    Returns:
      (run, carry): `run(carry, key) -> (carry, kept)`, jitted, kept stacked over the steps;
      `carry` the batch after its reset, for the first call.
    """
    gymnax = require("gymnax")
    env, params = gymnax.make(name)
    if policy is None:
        policy = discrete_policy(env.action_space(params).n)
    keys = jax.random.split(jax.random.key(0), num_envs)
    obs, state = strong_types(jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys, params))

    @jax.jit
    def run(carry, key):
        def body(carry, _):
            obs, state, key = carry
            key, k_act, k_step = jax.random.split(key, 3)
            step_keys = jax.random.split(k_step, num_envs)
            obs, state, reward, terminated, truncated, _ = jax.vmap(
                env.step, in_axes=(0, 0, 0, None)
            )(step_keys, state, policy(k_act, obs), params)
            return (obs, state, key), outputs(obs, reward, terminated, truncated)

        (obs, state, _), kept = jax.lax.scan(body, (*carry, key), None, length=steps)
        return (obs, state), kept

    return run, (obs, state)
