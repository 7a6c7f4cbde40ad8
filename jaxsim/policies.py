"""Built-in policies: `policy(key, obs[B, ...]) -> action[B, ...]` or `(action, extras)`."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxsim import rng
from jaxsim.core import Env
from jaxsim.spaces import Box, Discrete, Space


@dataclasses.dataclass(frozen=True)
class RandomPolicy:
    """Uniform random actions for any Discrete or Box space, drawn with counter-based randomness.

    The key given at each step is turned into one seed for the whole batch; environment `i` then
    draws `rng.bits(seed, i, 0, POLICY_STREAM + j)` for action component `j`, so a fused kernel can
    reproduce the same actions from the same per-step seed.
    """

    action_space: Space

    def __call__(self, key: jax.Array, obs: jax.Array) -> jax.Array:
        return self.from_seed(rng.seed_from_key(key), jnp.arange(obs.shape[0], dtype=jnp.uint32))

    def from_seed(self, seed, index) -> jax.Array:
        """Actions for environments `index[...]` -> action[..., *shape]."""
        space = self.action_space
        if isinstance(space, Discrete):
            return space.from_bits(rng.bits(seed, index, 0, rng.POLICY_STREAM))
        component = jnp.arange(space.size, dtype=jnp.uint32)
        stream = rng.POLICY_STREAM + 2 * component
        b1 = rng.bits(seed, index[..., None], 0, stream)
        b2 = rng.bits(seed, index[..., None], 0, stream + 1)
        shape = (*jnp.shape(index), *space.shape)
        return space.from_bits(b1.reshape(shape), b2.reshape(shape))


def random_policy(env: Env, params=None) -> RandomPolicy:
    """The uniform random policy over `env`'s action space."""
    params = env.default_params if params is None else params
    space = env.action_space(params)
    if not isinstance(space, Discrete | Box):
        raise TypeError(f"random_policy: unsupported action space {space!r}")
    return RandomPolicy(space)
