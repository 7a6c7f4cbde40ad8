"""The vector front's device programs: reset and step of a whole batch, each one jitted call.

`programs(env, num_envs, same_step, signature(params, sampler))` gives the `VectorPrograms`
`JaxsimVectorEnv` (`jaxsim.gymnasium.vector`) runs. A step is `jaxsim.rollout.step.policy_step`
on the batch, in Gymnasium's SAME_STEP or NEXT_STEP autoreset mode, over packed buffers: the
state and the fixed inputs as one uint32 buffer each, observations, rewards and flags back as
one uint8 buffer. `reference` gives the same reset and step on pytrees, unpacked.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxsim import rng
from jaxsim.core import Env, stack_obs
from jaxsim.gymnasium.step import Layout
from jaxsim.rng import ResetDraws
from jaxsim.rollout.step import Carry, Lanes, initial_carry, policy_step, with_episode_params

_LANES = Lanes(vmapped=True, compact_reset=True)  # one device: done lanes reset alone


class _GivenActions:
    """`jaxsim.rollout.step.policy_step`'s adapter for actions the host gave (Gymnasium's)."""

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


def _host_bytes(*arrays) -> jax.Array:
    """Arrays as one flat uint8 buffer, each a contiguous segment of its own bytes (a bool cell
    one byte, a float32 four): one transfer per step, read on the host through views of the
    segments' dtypes, with no cast (a bool grid as float32 0/1 cost 4x the bytes and a cast)."""
    parts = []
    for x in arrays:
        x = jnp.asarray(x)
        if x.dtype == jnp.bool_:
            parts.append(x.astype(jnp.uint8).ravel())
        else:
            parts.append(jax.lax.bitcast_convert_type(x, jnp.uint8).ravel())
    return jnp.concatenate(parts)


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
    """One step of the batch (the reference: pytrees in and out).

    Returns:
      (moving, shown): shown is (obs, reward, terminated, truncated, final_obs), leaves
      [num_envs, ...]; final_obs (SAME_STEP only, else None) the observation before the reset.
    """
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
        shown = (obs, reward, terminated, truncated, next_obs)
        return Moving(carry, moving.pending, counter), shown
    # NEXT_STEP: a lane whose last step ended shows the reset its carry already holds (the
    # observation policy_step made of it), with reward 0 and no flags, and does not advance;
    # every other lane shows this step's true observation.
    pending = moving.pending
    # (pending broadcast over every observation axis: a grid [num_envs, 10, 10, C] too)
    obs = _where_lanes(pending, stack_obs(env, rec["obs_columns"]), next_obs)
    carry = _where_lanes(pending, moving.carry, carry)
    reward = jnp.where(pending, jnp.float32(0), reward)
    terminated = terminated & ~pending
    truncated = truncated & ~pending
    shown = (obs, reward, terminated, truncated, None)
    return Moving(carry, terminated | truncated, counter), shown


def _host_obs(env: Env) -> tuple[tuple[int, ...], np.dtype]:
    """One observation's shape and the dtype the host gets it in: bool for a bool grid, else
    float32 (the Gymnasium space's, `jaxsim.gymnasium.vector.gymnasium_space`)."""
    space = env.observation_space(env.default_params)
    bool_grid = np.dtype(space.dtype) == np.bool_
    return tuple(space.shape), np.dtype(np.bool_ if bool_grid else np.float32)


class HostLayout:
    """Where each output lies in the step's uint8 host buffer: reward (float32, first, so every
    view is aligned), then obs, terminated, truncated and, SAME_STEP, the final obs."""

    def __init__(self, env: Env, num_envs: int, same_step: bool):
        self.num_envs = n = num_envs
        shape, self.obs_dtype = _host_obs(env)
        self.obs_shape = (n, *shape)
        obs_bytes = int(np.prod(self.obs_shape, dtype=np.int64)) * self.obs_dtype.itemsize
        self.reward = slice(0, 4 * n)
        self.obs = slice(self.reward.stop, self.reward.stop + obs_bytes)
        self.terminated = slice(self.obs.stop, self.obs.stop + n)
        self.truncated = slice(self.terminated.stop, self.terminated.stop + n)
        self.final_obs = slice(self.truncated.stop, self.truncated.stop + obs_bytes * same_step)
        self.size = self.final_obs.stop

    def pack(self, shown) -> jax.Array:
        obs, reward, terminated, truncated, final_obs = shown
        arrays = [jnp.asarray(reward, jnp.float32), jnp.asarray(obs, self.obs_dtype)]
        arrays += [jnp.asarray(terminated, jnp.bool_), jnp.asarray(truncated, jnp.bool_)]
        if final_obs is not None:
            arrays.append(jnp.asarray(final_obs, self.obs_dtype))
        return _host_bytes(*arrays)

    def obs_of(self, host: np.ndarray, where: slice) -> np.ndarray:
        """A fresh numpy [num_envs, *obs_shape] from the host buffer's `where` segment."""
        return host[where].view(self.obs_dtype).reshape(self.obs_shape).copy()

    def unpack(self, host: np.ndarray):
        """(obs, reward, terminated, truncated) as fresh numpy arrays, from a host view."""
        return (
            self.obs_of(host, self.obs),
            host[self.reward].view(np.float32).copy(),
            host[self.terminated].view(np.bool_).copy(),
            host[self.truncated].view(np.bool_).copy(),
        )


def _packed_reset(env: Env, num_envs: int, layouts, seed, key, params, sampler, moving_words, mask):
    moving_layout, fixed_layout, obs_dtype = layouts
    moving = None if moving_words is None else moving_layout.unpack(moving_words)
    moving, fixed, obs = _reset(env, num_envs, seed, key, params, sampler, moving, mask)
    return moving_layout.pack(moving), fixed_layout.pack(fixed), jnp.asarray(obs, obs_dtype)


def _packed_step(env: Env, num_envs: int, same_step: bool, layouts, moving_words, fixed_words,
                 action):  # fmt: skip
    moving_layout, fixed_layout, host = layouts
    moving, fixed = moving_layout.unpack(moving_words), fixed_layout.unpack(fixed_words)
    moving, shown = _step(env, num_envs, same_step, moving, fixed, action)
    return moving_layout.pack(moving), host.pack(shown)


class VectorPrograms:
    """The batch's compiled reset and step over packed buffers, for one environment, batch
    size, autoreset mode and structure of params and params sampler.

    JAX's dispatch costs per argument and per output array: the state a step replaces
    (`Moving`) and what it only reads (`Fixed`) each travel as one flat uint32 buffer
    (`jaxsim.gymnasium.step.Layout`), and what the host reads as one uint8 buffer
    (`HostLayout`), so a step is three arrays in (state, fixed, actions) and two out, however
    many leaves the environment's state has. `step` donates the state it replaces.
    """

    def __init__(self, env: Env, num_envs: int, same_step: bool, signature):
        self.env, self.num_envs, self.same_step = env, num_envs, same_step
        owner = f"jaxsim/{env.id}"
        treedef, leaves = signature
        params, sampler = jax.tree.unflatten(
            treedef, [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in leaves]
        )
        words = jax.ShapeDtypeStruct((2,), jnp.uint32)
        moving, fixed, _ = jax.eval_shape(
            functools.partial(_reset, env, num_envs), words, words, params, sampler, None, None
        )
        self.moving_layout = Layout(owner, moving)
        self.fixed_layout = Layout(owner, fixed)
        self.host = HostLayout(env, num_envs, same_step)
        reset_layouts = (self.moving_layout, self.fixed_layout, self.host.obs_dtype)
        step_layouts = (self.moving_layout, self.fixed_layout, self.host)
        self.reset = jax.jit(functools.partial(_packed_reset, env, num_envs, reset_layouts))
        self.step = jax.jit(
            functools.partial(_packed_step, env, num_envs, same_step, step_layouts),
            donate_argnums=0,
        )
        self.unpack_moving = jax.jit(self.moving_layout.unpack)
        self.unpack_fixed = jax.jit(self.fixed_layout.unpack)


def signature(params, sampler):
    """The hashable structure of (params, sampler): what the packed buffers' layouts follow."""
    leaves, treedef = jax.tree.flatten((params, sampler))
    return treedef, tuple((tuple(np.shape(x)), np.dtype(jnp.result_type(x))) for x in leaves)


@functools.cache
def programs(env: Env, num_envs: int, same_step: bool, signature) -> VectorPrograms:
    """The `VectorPrograms` of one environment, batch size, mode and `signature(params,
    sampler)`: cached, so instances share compilations. Binding the static arguments here,
    rather than through `static_argnums`, spares each call hashing the environment."""
    return VectorPrograms(env, num_envs, same_step, signature)


@functools.cache
def reference(env: Env, num_envs: int, same_step: bool):
    """(reset, step), the unpacked programs `VectorPrograms` packs, jitted: what a test
    compares the packed step's outputs with."""
    reset = jax.jit(functools.partial(_reset, env, num_envs))
    step = jax.jit(functools.partial(_step, env, num_envs, same_step))
    return reset, step
