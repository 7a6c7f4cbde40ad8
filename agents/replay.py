"""A circular replay buffer as pure functions over a pytree on the device: `init`, `add`, `sample`.

It stores whole transitions (obs, action, reward, next_obs, terminated, truncated), taking
`next_obs` from `Trajectory.next_obs`: under jaxsim's same-step auto-reset `obs[t + 1]` already
belongs to the next episode where step t ended one, so a buffer that paired `obs[t]` with
`obs[t + 1]` (as flashbax's trajectory buffer does) would bootstrap a time-out from a reset state.
Slots fill in order from 0, so the filled slots are always `[0, size)`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

import jaxsim
from agents.config import check_value


@struct.dataclass
class Transition:
    """Transitions with leading axes [...] (none for one transition, [N] for a batch)."""

    obs: jax.Array  # [..., *obs_shape], the observation space's dtype
    action: jax.Array  # [..., *action_shape]
    reward: jax.Array  # [...] float32
    next_obs: jax.Array  # [..., *obs_shape]: the true next observation (terminal or truncated)
    terminated: jax.Array  # [...] bool: no bootstrap
    truncated: jax.Array  # [...] bool: the time limit cut the episode; targets still bootstrap


@struct.dataclass
class ReplayBuffer:
    data: Transition  # leaves [capacity, ...]
    pos: jax.Array  # int32: the slot the next transition goes to
    size: jax.Array  # int32: filled slots, [0, size)

    @property
    def capacity(self) -> int:
        return self.data.reward.shape[-1]


def init(capacity: int, example: Transition) -> ReplayBuffer:
    """An empty buffer of `capacity` slots shaped like `example` (one transition, arrays or
    `jax.ShapeDtypeStruct`s, no leading axis)."""
    check_value("replay.init", "capacity", capacity, ge=1)
    data = jax.tree.map(lambda x: jnp.zeros((capacity, *x.shape), x.dtype), example)
    return ReplayBuffer(data=data, pos=jnp.int32(0), size=jnp.int32(0))


def example_transition(env: jaxsim.Env, params=None) -> Transition:
    """One transition's shapes and dtypes for `env` (what `init` takes)."""
    params = env.default_params if params is None else params
    obs_space, action_space = env.observation_space(params), env.action_space(params)
    obs = jax.ShapeDtypeStruct(obs_space.shape, obs_space.dtype)
    flag = jax.ShapeDtypeStruct((), jnp.bool_)
    return Transition(
        obs=obs,
        action=jax.ShapeDtypeStruct(action_space.shape, action_space.dtype),
        reward=jax.ShapeDtypeStruct((), jnp.float32),
        next_obs=obs,
        terminated=flag,
        truncated=flag,
    )


def from_trajectory(traj: jaxsim.Trajectory) -> Transition:
    """A rollout's transitions, leaves [T, num_envs, ...] -> [T * num_envs, ...], time-major
    (so when the buffer wraps, the oldest steps go first)."""
    t = Transition(
        obs=traj.obs,
        action=traj.action,
        reward=traj.reward,
        next_obs=traj.next_obs,
        terminated=traj.terminated,
        truncated=traj.truncated,
    )
    return jax.tree.map(lambda x: x.reshape((-1, *x.shape[2:])), t)


def add(buffer: ReplayBuffer, batch: Transition) -> ReplayBuffer:
    """Writes `batch` (leaves [N, ...], N <= capacity) at slots pos, pos + 1, ... mod capacity."""
    n, capacity = batch.reward.shape[0], buffer.capacity
    if n > capacity:
        raise ValueError(f"replay.add: a batch of {n} transitions exceeds the capacity {capacity}")
    slots = (buffer.pos + jnp.arange(n, dtype=jnp.int32)) % capacity
    data = jax.tree.map(
        lambda store, x: store.at[slots].set(x.astype(store.dtype)), buffer.data, batch
    )
    return ReplayBuffer(
        data=data,
        pos=(buffer.pos + n) % capacity,
        size=jnp.minimum(buffer.size + n, capacity),
    )


def sample(buffer: ReplayBuffer, key: jax.Array, batch_size: int) -> Transition:
    """`batch_size` transitions drawn uniformly, with replacement, from the filled slots -> leaves
    [batch_size, ...]. From an empty buffer it returns slot 0's zeros (callers gate on size)."""
    index = jax.random.randint(key, (batch_size,), 0, jnp.maximum(buffer.size, 1))
    return jax.tree.map(lambda store: store[index], buffer.data)
