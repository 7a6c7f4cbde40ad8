"""Same-step auto-reset: where a rollout's fresh episodes come from, and how a batch resets.

`ResetDraws` holds a rollout's counter-based reset draws: each environment's numbers are a pure
function of (seed, environment index, counter), so any subset of the batch can draw its own
without the rest. `auto_reset` replaces the state of the environments that are done:

- no environment done: nothing runs;
- on the compact path (`compact=True`), the done environments' indices are gathered into
  `reset_slots(batch)` slots, the reset draws and `init_state` run on the slots only, and the
  fresh states are scattered back; more done than slots take further passes of the same loop
  (a `lax.while_loop`), so the reset is traced and compiled once. A simulator whose reset costs
  a physics solve (brax: a forward pass of the pipeline) then pays for the environments that
  reset, not for the batch, and its reset is compiled once, not twice;
- without `compact` (the fused kernel, a mesh): `init_state` on the whole batch, selected where
  done, when any is.

Both paths draw the same numbers for every lane (counter-based, by index), so where
`init_state` computes each lane alone (jaxsim's native environments, gymnax) they give the same
states bit for bit (tests/jaxsim/test_autoreset.py). brax's reset is batched linear algebra (the
pipeline's mass matrix and contacts), whose float rounding on the CPU depends on the batch size:
ant from the same keys at 16 and at 256 lanes differs by up to 1e-7 relative in most leaves and
4e-5 in its contact terms, so there the two paths give the same episodes up to that rounding,
which brax's contacts then amplify (`python -m benchmarks.compact_reset` records both). The
compact path always resets `reset_slots(batch)` lanes at a time, whatever the done count.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from jaxsim import rng

# The compact path has room for a sixteenth of the batch. A lane's episode must last 16 steps
# on average for the done count to stay mostly within it (ant with random actions: ~40;
# CartPole: ~22); the slots' reset then costs a sixteenth of the batch's, and the gather and
# scatter around it touch only the slots' state.
RESET_FRACTION = 16


@struct.dataclass
class ResetDraws:
    """Counter-based draws of auto-resets: reset uniforms and, with a sampler, episode params.

    `reset_keys` are the loop-invariant halves of each reset uniform (one [batch] array per
    uniform), so each reset costs one hash per uniform, plus one per component of an
    array-valued uniform (`Env.draws`; `rng.component_bits`).
    """

    seed: Any  # (uint32, uint32)
    index: jax.Array  # uint32[batch]: the environments' global indices
    reset_keys: tuple
    sampler: Any = None  # a params sampler (e.g. jaxsim.UniformParams), or None
    # The environment's reset takes a PRNG key (`Draws(reset='key')`), not uniforms.
    as_key: bool = struct.field(pytree_node=False, default=False)
    # Each uniform's shape for one environment (`Env.reset_uniform_shapes`); unused with as_key.
    shapes: tuple = struct.field(pytree_node=False, default=())
    # The loop-invariant halves of the dynamics' step uniforms (`Env.draws`), one
    # [batch] array each, on streams apart from the reset draws'; and each one's shape.
    step_keys: tuple = ()
    step_shapes: tuple = struct.field(pytree_node=False, default=())

    @classmethod
    def for_rollout(cls, env, key, num_envs: int, sampler=None, offset=0) -> ResetDraws:
        """A rollout's draws: the seed of `key`'s reset key (`rng.RolloutKeys`), indices
        offset ... offset + num_envs - 1 (a shard of a batch starts at a nonzero offset)."""
        seed = rng.RolloutKeys.split(key).reset_seed()
        index = jnp.asarray(offset, jnp.uint32) + jnp.arange(num_envs, dtype=jnp.uint32)
        return cls.make(env, seed, index, sampler)

    @classmethod
    def make(cls, env, seed, index, sampler=None) -> ResetDraws:
        as_key = env.draws.reset_key
        shapes = () if as_key else env.reset_uniform_shapes()
        words = 2 if as_key else len(shapes)
        streams = range(rng.RESET_STREAM, rng.RESET_STREAM + words)
        keys = tuple(rng.stream_key(seed, index, s) for s in streams)
        step_shapes = env.step_uniform_shapes()
        step_streams = range(rng.ENV_STREAM, rng.ENV_STREAM + len(step_shapes))
        step_keys = tuple(rng.stream_key(seed, index, s) for s in step_streams)
        return cls(seed, index, keys, sampler, as_key, shapes, step_keys, step_shapes)

    def reset_draw(self, counter):
        """What `env.init_state` takes first: a tuple of float32 uniforms [batch, *shape] in
        [0, 1), one per declared shape, or, for an environment that resets from a key, raw PRNG
        keys uint32[batch, 2].

        Either is a pure function of (seed, environment index, counter).
        """
        if self.as_key:
            counter = jnp.asarray(counter, jnp.uint32)
            bits = tuple(rng.bits_from_stream_key(k, counter) for k in self.reset_keys)
            return jnp.stack(bits, axis=-1)
        return _uniforms(self.reset_keys, self.shapes, counter)

    def step_draw(self, counter):
        """The dynamics' step uniforms at step `counter` (the step number after the step):
        a tuple of float32 [batch, *shape] in [0, 1), or None for dynamics that draw none.

        A pure function of (seed, environment index, counter), as the reset draws are, on
        streams of their own, so every backend draws the same numbers."""
        if not self.step_shapes:
            return None
        return _uniforms(self.step_keys, self.step_shapes, counter)

    def episode_params(self, counter) -> dict[str, jax.Array] | None:
        if self.sampler is None:
            return None
        return self.sampler.draw(self.seed, self.index, counter)

    def take(self, lanes: jax.Array) -> ResetDraws:
        """The draws of environments `lanes` (int32[K], each in range): the same numbers those
        environments draw in the whole batch, since every draw is a function of the index."""
        return self.replace(
            index=self.index[lanes],
            reset_keys=tuple(k[lanes] for k in self.reset_keys),
            step_keys=tuple(k[lanes] for k in self.step_keys),
        )


def _uniforms(keys, shapes, counter) -> tuple:
    """Draw `counter` of each stream in `keys`: float32 uniforms [batch, *shape] in [0, 1)."""
    counter = jnp.asarray(counter, jnp.uint32)
    return tuple(
        rng.to_uniform(rng.component_bits(rng.bits_from_stream_key(k, counter), shape))
        for k, shape in zip(keys, shapes, strict=True)
    )


def map_with_axes(fn, params, params_axes):
    """`fn(leaf, axis)` over params leaves and their axes (None: shared, 0: per environment)."""
    return jax.tree.map(lambda axis, x: fn(x, axis), params_axes, params, is_leaf=_is_none)


def _is_none(x) -> bool:
    return x is None


def with_episode_params(params, params_axes, episode_params):
    """(params, axes) with the fields drawn for each environment's episode replacing the base."""
    if not episode_params:
        return params, params_axes
    return params.replace(**episode_params), params_axes.replace(**dict.fromkeys(episode_params, 0))


def _select(done, a, b):
    def one(x, y):
        return jnp.where(done.reshape(done.shape + (1,) * (jnp.ndim(x) - done.ndim)), x, y)

    return jax.tree.map(one, a, b)


def reset_slots(num_envs: int) -> int:
    """How many done environments the compact path resets: the power of two at or above
    num_envs / RESET_FRACTION (static: it fixes the slots' shapes). 1 for 16 or fewer."""
    return 1 << max(0, math.ceil(math.log2(max(1, math.ceil(num_envs / RESET_FRACTION)))))


def auto_reset(
    init_state: Callable,
    done: jax.Array,
    next_state,
    episode_params,
    params,
    params_axes,
    counter,
    draws: ResetDraws,
    compact: bool,
):
    """The batch's state after same-step auto-reset, and each environment's episode params.

    Args:
      init_state: `init_state(draw, params, params_axes, lanes) -> state` over a batch of
        `lanes` environments (the environment's reset mapped over them).
      done: bool[batch]: which environments start a new episode.
      next_state: the batch's state after the step; kept where not done.
      episode_params: the per-episode params fields (dict of [batch, ...]) or None.
      params, params_axes: the rollout's params and which leaves are per environment.
      counter: the reset draws' counter (uint32).
      draws: the batch's reset draws.
      compact: reset the done environments `reset_slots(batch)` at a time, on their own (see
        the module docstring); else the whole batch whenever any is done.

    Returns:
      (state, episode_params) with the done environments' replaced.
    """
    num_envs = done.shape[0]
    slots = reset_slots(num_envs)

    def whole(_):
        drawn = draws.episode_params(counter)
        reset_params, reset_axes = with_episode_params(params, params_axes, drawn)
        fresh = init_state(draws.reset_draw(counter), reset_params, reset_axes, num_envs)
        return _select(done, fresh, next_state), _select(done, drawn, episode_params)

    def keep(_):
        return next_state, episode_params

    def any_of(mask):  # Triton reduces no booleans: count the lanes as int32
        return jnp.max(mask.astype(jnp.int32)) > 0

    if not compact or slots >= num_envs:
        return jax.lax.cond(any_of(done), whole, keep, None)

    def next_slots(carry):
        # The first `slots` lanes still to reset, in order; the empty slots point past the
        # batch: they reset the last environment (clipped) and their results are dropped on the
        # way back.
        state, episode_params, pending = carry
        lanes = jnp.nonzero(pending, size=slots, fill_value=num_envs)[0]
        inside = jnp.minimum(lanes, num_envs - 1)
        part = draws.take(inside)
        drawn = part.episode_params(counter)
        part_params = map_with_axes(
            lambda x, axis: x if axis is None else x[inside], params, params_axes
        )
        reset_params, reset_axes = with_episode_params(part_params, params_axes, drawn)
        fresh = init_state(part.reset_draw(counter), reset_params, reset_axes, slots)

        def put(full, new):
            return full.at[lanes].set(new, mode="drop")

        state = jax.tree.map(put, state, fresh)
        episode_params = jax.tree.map(put, episode_params, drawn)
        return state, episode_params, pending.at[lanes].set(False, mode="drop")

    state, episode_params, _ = jax.lax.while_loop(
        lambda carry: any_of(carry[2]), next_slots, (next_state, episode_params, done)
    )
    return state, episode_params
