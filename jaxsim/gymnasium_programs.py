"""The vector front's device programs: reset and step of a whole batch, each one jitted call.

`programs(env, num_envs, same_step)` gives the pair `JaxsimVectorEnv` (`jaxsim.gymnasium_vector`)
runs. A step is `jaxsim.transition.batch_step` on the batch, in Gymnasium's SAME_STEP or
NEXT_STEP autoreset mode; its observations, rewards and flags come back as one float32 buffer.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from jaxsim import rng
from jaxsim.autoreset import ResetDraws, with_episode_params
from jaxsim.core import Env
from jaxsim.transition import Carry, Lanes, initial_carry, policy_step, stack_obs

_LANES = Lanes(vmapped=True, compact_reset=True)  # one device: done lanes reset alone


class _GivenActions:
    """`jaxsim.transition.policy_step`'s adapter for actions the host gave (Gymnasium's)."""

    def view(self, env, columns):
        return stack_obs(env, columns)

    def act(self, env, action, index, obs):
        return action, {}


_GIVEN = _GivenActions()


@struct.dataclass
class Fixed:
    """What every step reads and none changes (until the next reset)."""

    params: Any  # leaves shared or [num_envs]
    draws: ResetDraws  # the batch's reset draws (and params sampler), from the reset's seed
    key: jax.Array  # raw uint32[2]: stochastic dynamics' keys fold in the step counter


@struct.dataclass
class Moving:
    """What each step replaces (donated to it); leaves [num_envs] unless noted."""

    carry: Carry  # after same-step auto-reset, as batch_step leaves it
    pending: jax.Array  # bool: NEXT_STEP: the last step ended the episode, reset not yet shown
    counter: jax.Array  # uint32 scalar: steps since the reset, the counter of the reset draws


def _observe(env: Env, carry: Carry, fixed: Fixed, params_axes) -> jax.Array:
    params, axes = with_episode_params(fixed.params, params_axes, carry.episode_params)
    return stack_obs(env, _LANES.observe(env, carry.env_state, params, axes))


def _where_lanes(mask, a, b):
    """Leafwise `where(mask, a, b)` over pytrees whose leaves have leading [num_envs]."""

    def one(x, y):
        return jnp.where(mask.reshape(mask.shape + (1,) * (jnp.ndim(x) - 1)), x, y)

    return jax.tree.map(one, a, b)


def _host_buffer(*arrays) -> jax.Array:
    """Arrays as one flat float32 buffer, each a contiguous segment: one transfer per step, and
    contiguous copies on the host (a strided column costs several times more to copy). A bool
    observation travels as float32 0/1 too, cast back on the host."""
    return jnp.concatenate([jnp.ravel(jnp.asarray(x, jnp.float32)) for x in arrays])


def _reset(env: Env, num_envs: int, seed, key, params, sampler, moving, mask):
    """A new batch seed; lanes in `mask` (all if `moving` is None) start an episode at counter 0.

    Returns:
      (moving, fixed, obs[num_envs, *obs_shape]).
    """
    params_axes = env.params_axes(params, num_envs, owner=f"jaxsim/{env.id}")
    draws = ResetDraws.make(env, seed, jnp.arange(num_envs, dtype=jnp.uint32), sampler)
    fixed = Fixed(params, draws, key)
    carry = initial_carry(env, _LANES, params, params_axes, draws, False, False)
    pending = jnp.zeros((num_envs,), jnp.bool_)
    if moving is not None:  # the other lanes keep their episodes
        carry = _where_lanes(mask, carry, moving.carry)
        pending = moving.pending & ~mask
    obs = _observe(env, carry, fixed, params_axes)
    return Moving(carry, pending, jnp.uint32(0)), fixed, obs


def _step(env: Env, num_envs: int, same_step: bool, moving: Moving, fixed: Fixed, action):
    """One step of the batch; returns (moving, host buffer: obs, reward, flags[, final obs])."""
    params_axes = env.params_axes(fixed.params, num_envs, owner=f"jaxsim/{env.id}")
    counter = moving.counter + jnp.uint32(1)
    keys = None
    if env.draws.step_key:
        keys = rng.dynamics_keys(fixed.key, counter, num_envs)
    carry, rec = policy_step(
        env, _LANES, _GIVEN, action, moving.carry, fixed.params, params_axes, moving.counter,
        fixed.draws, keys,
    )  # fmt: skip
    next_obs = stack_obs(env, rec["next_obs"])  # before the auto-reset
    reward, terminated, truncated = rec["reward"], rec["terminated"], rec["truncated"]
    if same_step:
        obs = _observe(env, carry, fixed, params_axes)  # after it
        host = _host_buffer(obs, reward, terminated, truncated, next_obs)
        return Moving(carry, moving.pending, counter), host
    # NEXT_STEP: a lane whose last step ended shows the reset its carry already holds, with
    # reward 0 and no flags, and does not advance; every other lane shows this step's true
    # observation.
    pending = moving.pending
    # (pending broadcast over every observation axis: a grid [num_envs, 10, 10, C] too)
    shown = _where_lanes(pending, _observe(env, moving.carry, fixed, params_axes), next_obs)
    carry = _where_lanes(pending, moving.carry, carry)
    reward = jnp.where(pending, jnp.float32(0), reward)
    terminated = terminated & ~pending
    truncated = truncated & ~pending
    host = _host_buffer(shown, reward, terminated, truncated)
    return Moving(carry, terminated | truncated, counter), host


@functools.cache
def programs(env: Env, num_envs: int, same_step: bool):
    """(reset, step) jitted for one environment, batch size and mode, shared by instances.

    Binding the static arguments here, rather than through `static_argnums`, spares each call
    hashing the environment; `step` donates the state it replaces.
    """
    reset = jax.jit(functools.partial(_reset, env, num_envs))
    step = jax.jit(functools.partial(_step, env, num_envs, same_step), donate_argnums=0)
    return reset, step
