"""The random policies the JAX loops of a comparison share: (key, obs[N, ...]) -> actions [N, ...],
one draw per batch step, so that every loop of a pair samples its actions alike."""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np


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
