"""Counter-based randomness: a stateless uint32 hash of (seed, index, counter, stream).

Splitting a threefry key per environment per step costs more than classic-control physics. Here a
draw is a pure function of four integers, so it vectorises, needs no key plumbing, runs inside a
Pallas kernel (uint32 arithmetic only: xor, shift, wrapping multiply) and gives the same numbers
on every backend and under any sharding of the environment index.

The hash is built from `mix`, Chris Wellons' `lowbias32` integer finaliser, a bijection on uint32
with near-ideal avalanche. Inputs enter in order of how often they change (seed and stream, then
the environment index, then the step counter), so `stream_key` can be computed once per
environment outside a loop and each draw inside costs one `mix`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxsim import sharding

# Streams keep independent uses of one seed apart. Add the component index to a base.
RESET_STREAM = 0x1000
POLICY_STREAM = 0x2000
ENV_STREAM = 0x3000

_M1 = np.uint32(0x7FEB352D)
_M2 = np.uint32(0x846CA68B)
_TWO_POW_MINUS_24 = np.float32(2.0**-24)
_COMPONENT_SALT = np.uint32(0x9E3779B9)  # keeps component 0 apart from the draw it comes from


def mix(x):
    """Bijective avalanche hash of uint32 values (elementwise)."""
    x = jnp.asarray(x, jnp.uint32)
    x = x ^ (x >> np.uint32(16))
    x = x * _M1
    x = x ^ (x >> np.uint32(15))
    x = x * _M2
    return x ^ (x >> np.uint32(16))


def check_key(owner: str, key) -> jax.Array:
    """`key` if it is one PRNG key (typed, or a raw uint32[2]); else a ValueError naming it."""
    if isinstance(key, jax.Array | np.ndarray):
        if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) and key.shape == ():
            return key
        if key.dtype == np.uint32 and key.shape == (2,):
            return key
    got = f"{key.dtype}{list(key.shape)}" if hasattr(key, "dtype") else repr(key)
    raise ValueError(
        f"{owner}: key must be one PRNG key (jax.random.key(seed) or jax.random.PRNGKey(seed)), "
        f"got {got}"
    )


def seed_from_key(key: jax.Array) -> jax.Array:
    """Derives a 64-bit seed, as uint32[2], from a JAX PRNG key (raw or typed)."""
    return jax.random.bits(key, (2,), jnp.uint32)


def stream_key(seed, index, stream):
    """The part of a draw that does not depend on the counter (hoist it out of loops).

    Args:
      seed: uint32[2] from `seed_from_key` (or a pair of uint32 scalars).
      index: environment index, any integer shape.
      stream: which independent sequence, an integer (broadcasts against `index`).
    Returns:
      uint32 with the broadcast shape of `index` and `stream`.
    """
    h = mix(jnp.asarray(seed[1], jnp.uint32) ^ jnp.asarray(stream, jnp.uint32))
    h = mix(h ^ jnp.asarray(seed[0], jnp.uint32))
    return mix(h ^ jnp.asarray(index, jnp.uint32))


def bits_from_stream_key(skey, counter):
    """uint32 draw number `counter` of the sequence that `stream_key` named."""
    return mix(skey ^ mix(jnp.asarray(counter, jnp.uint32)))


def bits(seed, index, counter, stream):
    """uint32 draws, a pure function of (seed, index, counter, stream), elementwise."""
    return bits_from_stream_key(stream_key(seed, index, stream), counter)


def component_bits(b, shape: tuple[int, ...]):
    """uint32 draws[..., *shape] from draws b[...]: one independent draw per component.

    Component c of draw b is `mix(b ^ mix(c + salt))`: elementwise, with the component index an
    iota, so it runs inside a kernel; an array-valued reset uniform (one per particle) costs one
    hash per component beyond its environment's draw.
    """
    if not shape:
        return b
    b = jnp.asarray(b, jnp.uint32)
    component = jnp.arange(math.prod(shape), dtype=jnp.uint32).reshape(shape)
    return mix(b.reshape(b.shape + (1,) * len(shape)) ^ mix(component + _COMPONENT_SALT))


def to_uniform(b):
    """uint32 bits -> float32 uniform in [0, 1) with 24 bits of resolution."""
    return (b >> np.uint32(8)).astype(jnp.float32) * _TWO_POW_MINUS_24


def to_randint(b, n):
    """uint32 bits -> int32 uniform in [0, n) (n a positive int or int array).

    The product is non-negative, so the int32 conversion's truncation is its floor (no
    `floor` op: Mosaic GPU has none), identical for every input."""
    return jnp.minimum((to_uniform(b) * n).astype(jnp.int32), jnp.int32(n) - 1)


def to_normal(b1, b2):
    """Two independent uint32 draws -> one standard normal float32 (Box-Muller)."""
    u1 = np.float32(1.0) - to_uniform(b1)  # in (0, 1]: log is finite
    u2 = to_uniform(b2)
    return jnp.sqrt(np.float32(-2.0) * jnp.log(u1)) * jnp.cos(np.float32(2.0 * np.pi) * u2)


def uniform(seed, index, counter, stream):
    """float32 uniform in [0, 1), elementwise over broadcast inputs."""
    return to_uniform(bits(seed, index, counter, stream))


def randint(seed, index, counter, stream, n):
    """int32 uniform in [0, n), elementwise over broadcast inputs."""
    return to_randint(bits(seed, index, counter, stream), n)


def normal(seed, index, counter, stream):
    """float32 standard normal; uses `stream` and `stream + 1`."""
    return to_normal(
        bits(seed, index, counter, stream), bits(seed, index, counter, jnp.uint32(stream) + 1)
    )


# ------------------------------------------------------------------------------- a rollout's key
class RolloutKeys(NamedTuple):
    """The one split of a rollout's key, which every backend draws from (so all draw alike).

    `reset`: the reset draws' seed (`ResetDraws`); `policy`: the policy's per-step keys (or
    seeds, for counter-based policies); `step`: per-environment keys of stochastic dynamics.
    Made inside each backend's jit from the raw key, so the split costs no call of its own.
    """

    reset: jax.Array
    policy: jax.Array
    step: jax.Array

    @classmethod
    def split(cls, key: jax.Array) -> RolloutKeys:
        reset, policy, step = jax.random.split(key, 3)
        return cls(reset, policy, step)

    def reset_seed(self) -> jax.Array:
        """uint32[2]: the seed of every reset draw (and params sampler draw) of the rollout."""
        return seed_from_key(self.reset)

    def policy_keys(self, n: int) -> jax.Array:
        """Keys [n] of the policy at steps 0 ... n - 1."""
        steps = jnp.arange(n, dtype=jnp.int32)
        return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(self.policy, steps)

    def policy_seeds(self, n: int) -> jax.Array:
        """uint32[n, 2]: the seeds of a counter-based policy (`act_from_seed`) at each step."""
        return jax.vmap(seed_from_key)(self.policy_keys(n))

    def step_keys(self, t, num_envs: int) -> jax.Array:
        """Keys [num_envs] of a stochastic environment's dynamics at step `t`."""
        return dynamics_keys(self.step, t, num_envs)


def dynamics_keys(key: jax.Array, t, num_envs: int) -> jax.Array:
    """Keys [num_envs] of stochastic dynamics at step `t` from one key (the Gymnasium front's
    per-reset key, or a rollout's `RolloutKeys.step`)."""
    return jax.random.split(jax.random.fold_in(key, t), num_envs)


# ---------------------------------------------------------------------------- continuing rollouts
_CONTINUE_STREAM = 0x5EED  # folded into a rollout's key: the key its continuation draws from


@functools.partial(jax.jit, static_argnums=(1, 2))
def continuation_keys(key, num_envs: int, mesh) -> jax.Array:
    """uint32[num_envs, 2] (every row the same, split like the batch on `mesh`): the raw key a
    rollout continuing, without a key, from the state a rollout with `key` returned uses."""
    bits = seed_from_key(jax.random.fold_in(key, _CONTINUE_STREAM))
    return sharding.constrain(jnp.broadcast_to(bits, (num_envs, 2)), mesh)


@jax.jit
def _first_row(keys):
    return keys[0]


def continuation_key(state) -> jax.Array:
    """The key of a rollout given no `key=`: `jax.random.key(0)` from scratch (`state` None),
    else the one `state.next_key` carries; a ValueError for a state that carries none."""
    if state is None:
        return jax.random.key(0)
    if state.next_key is None:
        raise ValueError(
            "rollout: state= carries no key to continue from (a batched env state, or a "
            "RolloutState made by hand); pass key= so that the continuation draws fresh "
            "actions and resets instead of replaying the default key's"
        )
    return _first_row(state.next_key)


# ------------------------------------------------------------------ what an environment draws
KEY = "key"


@dataclasses.dataclass(frozen=True)
class Draws:
    """The random numbers an environment draws, declared once on its class (`Env.draws`).

    Each of `reset` and `step` is one of:

    - an int n: n float32 uniforms in [0, 1), scalars, passed as a tuple (`init_state(u,
      params)`; `dynamics(state, action, params, u)`); 0, the default: no draws (a fixed start,
      deterministic dynamics, which then take no fourth argument);
    - a tuple of shapes: one uniform array of each shape, entries possibly naming static-config
      fields (`(( ), ("num_particles",))`: a scalar, then one per particle);
    - `"key"`: a raw PRNG key uint32[2] instead (`init_state(key, params)`; `dynamics(state,
      action, params, key)`), for code written with `jax.random` (another library's step).

    Uniforms are counter-based (a hash of seed, environment index and step), so the scan and
    fused backends draw the same numbers and the kernel can draw them; a key is the simple form,
    which the fused kernel does not run.
    """

    reset: int | tuple | str = 0
    step: int | tuple | str = 0

    def __post_init__(self):
        for name in ("reset", "step"):
            value = getattr(self, name)
            if value == KEY and isinstance(value, str):
                continue
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                continue
            if isinstance(value, tuple) and all(_is_shape(s) for s in value):
                continue
            raise TypeError(
                f"Draws: {name} must be a count of scalar uniforms (an int >= 0), a tuple of "
                f"shapes (tuples of ints or static-config field names), or 'key', got {value!r}"
            )

    @property
    def reset_key(self) -> bool:
        """True if `init_state` takes a PRNG key instead of uniforms."""
        return self.reset == KEY

    @property
    def step_key(self) -> bool:
        """True if `dynamics` takes a PRNG key as its fourth argument."""
        return self.step == KEY

    def shapes(self, which: str, config) -> tuple[tuple[int, ...], ...]:
        """Each uniform's shape for one environment ("reset" or "step"); () for a key's draws."""
        value = getattr(self, which)
        if value == KEY:
            return ()
        if isinstance(value, int):
            return ((),) * value
        return tuple(
            tuple(getattr(config, d) if isinstance(d, str) else d for d in s) for s in value
        )


def _is_shape(s) -> bool:
    return isinstance(s, tuple) and all(
        isinstance(d, str) or (isinstance(d, int) and not isinstance(d, bool) and d >= 0) for d in s
    )


# ------------------------------------------------------------------ a batch's counter-based draws
@struct.dataclass
class ResetDraws:
    """Counter-based draws of auto-resets: reset uniforms and, with a sampler, episode params.

    `reset_keys` are the loop-invariant halves of each reset uniform (one [batch] array per
    uniform), so each reset costs one hash per uniform, plus one per component of an
    array-valued uniform (`Env.draws`; `component_bits`).
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
        """A rollout's draws: the seed of `key`'s reset key (`RolloutKeys`), indices
        offset ... offset + num_envs - 1 (a shard of a batch starts at a nonzero offset)."""
        seed = RolloutKeys.split(key).reset_seed()
        index = jnp.asarray(offset, jnp.uint32) + jnp.arange(num_envs, dtype=jnp.uint32)
        return cls.make(env, seed, index, sampler)

    @classmethod
    def make(cls, env, seed, index, sampler=None) -> ResetDraws:
        as_key = env.draws.reset_key
        shapes = () if as_key else env.reset_uniform_shapes()
        words = 2 if as_key else len(shapes)
        streams = range(RESET_STREAM, RESET_STREAM + words)
        keys = tuple(stream_key(seed, index, s) for s in streams)
        step_shapes = env.step_uniform_shapes()
        step_streams = range(ENV_STREAM, ENV_STREAM + len(step_shapes))
        step_keys = tuple(stream_key(seed, index, s) for s in step_streams)
        return cls(seed, index, keys, sampler, as_key, shapes, step_keys, step_shapes)

    def reset_draw(self, counter):
        """What `env.init_state` takes first: a tuple of float32 uniforms [batch, *shape] in
        [0, 1), one per declared shape, or, for an environment that resets from a key, raw PRNG
        keys uint32[batch, 2].

        Either is a pure function of (seed, environment index, counter).
        """
        if self.as_key:
            counter = jnp.asarray(counter, jnp.uint32)
            bits = tuple(bits_from_stream_key(k, counter) for k in self.reset_keys)
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
        to_uniform(component_bits(bits_from_stream_key(k, counter), shape))
        for k, shape in zip(keys, shapes, strict=True)
    )
