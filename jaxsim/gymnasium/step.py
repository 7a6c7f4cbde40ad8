"""The single Gymnasium env's device programs: one compiled call and one host buffer per step.

`jaxsim.gymnasium.JaxsimEnv` keeps everything a step reads and writes (its key, the state, the
params, and the step's observation, reward and flags) in one flat uint32 buffer on the device.
A step is one jitted call, buffer and action in, buffer out, and one host view of the result:
JAX's dispatch costs per argument and per output array, and `jax.device_get` of four scalars
costs four transfers, so one array each way is the floor a Python-driven step can reach.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim import spaces
from jaxsim.core import Env

_WORD = np.dtype(np.uint32)
# Discrete spaces up to this size keep one device scalar per action: a committed device array
# is the cheapest argument jit takes, and looking it up is the range check.
_MAX_TABLE = 256


@dataclasses.dataclass(frozen=True)
class _Field:
    offset: int
    size: int  # words
    shape: tuple[int, ...]
    dtype: np.dtype


def _narrow(dtype: np.dtype) -> np.dtype:
    """The unsigned integer type of `dtype`'s width, through which it travels as a word."""
    return np.dtype(f"uint{8 * dtype.itemsize}")


class Layout:
    """Where each leaf of a pytree lies in a flat uint32 buffer (one word per element).

    Elements of 32 bits are bit-cast, narrower ones widened (bool as 0/1), so every value
    round-trips exactly; 64-bit leaves (only under jax_enable_x64) are refused.
    """

    def __init__(self, owner: str, template):
        leaves, self.treedef = jax.tree.flatten(template)
        fields, offset = [], 0
        for leaf in leaves:
            dtype = np.dtype(leaf.dtype)
            if dtype.itemsize > 4:
                raise TypeError(
                    f"{owner}: the single-env step buffer holds leaves of at most 32 bits, got "
                    f"{dtype.name}{list(leaf.shape)}"
                )
            size = int(np.prod(leaf.shape, dtype=np.int64))
            fields.append(_Field(offset, size, tuple(leaf.shape), dtype))
            offset += size
        self.fields = tuple(fields)
        self.size = offset

    def pack(self, tree) -> jax.Array:
        """`tree` (traced) as uint32[size]; each leaf cast to its field's dtype first."""
        leaves = self.treedef.flatten_up_to(tree)
        words = [
            _to_words(jnp.asarray(x, f.dtype), f) for x, f in zip(leaves, self.fields, strict=True)
        ]
        return jnp.concatenate(words) if words else jnp.zeros((0,), _WORD)

    def unpack(self, words: jax.Array):
        """`pack`'s inverse, traced."""
        leaves = [_from_words(words[f.offset : f.offset + f.size], f) for f in self.fields]
        return self.treedef.unflatten(leaves)

    def pack_host(self, owner: str, tree) -> np.ndarray:
        """`tree` (host or device leaves) as a numpy uint32[size], each leaf checked for shape."""
        leaves = self.treedef.flatten_up_to(tree)
        words = []
        for leaf, f in zip(leaves, self.fields, strict=True):
            value = np.asarray(jax.device_get(leaf))
            if value.shape != f.shape:
                raise ValueError(f"{owner}: a leaf has shape {value.shape}, expected {f.shape}")
            value = value.astype(f.dtype)
            if f.dtype == np.bool_:
                words.append(value.astype(_WORD).ravel())
            else:
                words.append(value.view(_narrow(f.dtype)).astype(_WORD).ravel())
        return np.concatenate(words) if words else np.zeros((0,), _WORD)

    def host_leaf(self, words: np.ndarray, index: int) -> np.ndarray:
        """Leaf `index` read from a host view of the buffer (a view where the dtype allows)."""
        f = self.fields[index]
        raw = words[f.offset : f.offset + f.size]
        if f.dtype == np.bool_:
            value = raw != 0
        elif f.dtype.itemsize == 4:
            value = raw.view(f.dtype)
        else:
            value = raw.astype(_narrow(f.dtype)).view(f.dtype)
        return value.reshape(f.shape)


def _to_words(x: jax.Array, f: _Field) -> jax.Array:
    if f.dtype == np.bool_:
        return x.astype(jnp.uint32).ravel()
    narrow = jax.lax.bitcast_convert_type(x, _narrow(f.dtype))
    return narrow.astype(jnp.uint32).ravel()


def _from_words(words: jax.Array, f: _Field) -> jax.Array:
    if f.dtype == np.bool_:
        return (words != 0).reshape(f.shape)
    narrow = words.astype(_narrow(f.dtype))
    return jax.lax.bitcast_convert_type(narrow, f.dtype).reshape(f.shape)


def _outputs(ts):
    return ts.obs, ts.reward, ts.terminated, ts.truncated


# The buffer's pytree: the step's host outputs first (their offsets are fixed), then the carry.
def _buffer(obs, reward, terminated, truncated, key, state, params):
    return ((obs, reward, terminated, truncated), key, state, params)


def _reset(env: Env, layout: Layout, params_layout: Layout, keys, params_words):
    """keys: uint32[4], the steps' key then the reset's; params_words: the packed params."""
    params = params_layout.unpack(params_words)
    state, obs = env.reset(keys[2:], params)
    reward, terminated, truncated = (
        jnp.zeros(f.shape, f.dtype) for f in layout.fields[1:4]
    )  # not shown: reset returns only obs
    return layout.pack(_buffer(obs, reward, terminated, truncated, keys[:2], state, params))


def _step(env: Env, layout: Layout, words, action):
    _, key, state, params = layout.unpack(words)
    step_key = key
    if env.draws.step_key or env.step_uniform_shapes():  # a deterministic step ignores its key
        key, step_key = jax.random.split(key)
    state, ts = env.step(step_key, state, action, params)
    return layout.pack(_buffer(*_outputs(ts), key, state, params))


def _with_params(layout: Layout, params_layout: Layout, words, params_words):
    out, key, state, _ = layout.unpack(words)
    return layout.pack(_buffer(*out, key, state, params_layout.unpack(params_words)))


class Programs:
    """The compiled reset and step of one environment, shared by every instance of it.

    Pickles as the environment it was built for (the jitted programs are rebuilt on load).
    """

    def __init__(self, env: Env):
        self.env = env
        self.owner = f"jaxsim/{env.id}"
        params = env.default_params
        self.space = env.action_space(params)
        self.action_shape = tuple(self.space.shape)
        # The step's output shapes fix the buffer; reset fills the same layout.
        key = jax.ShapeDtypeStruct((2,), jnp.uint32)
        action = jax.ShapeDtypeStruct(self.action_shape, np.dtype(self.space.dtype))
        state, ts = jax.eval_shape(
            lambda k, p, a: env.step(k, env.reset(k, p)[0], a, p), key, params, action
        )
        params_shapes = jax.eval_shape(lambda p: p, params)
        self.layout = Layout(self.owner, _buffer(*_outputs(ts), key, state, params_shapes))
        self.params_layout = Layout(self.owner, params_shapes)
        obs, reward, terminated, truncated = self.layout.fields[:4]
        if reward.dtype != np.float32 or reward.size != 1 or terminated.size != 1:
            raise TypeError(f"{self.owner}: a step must give one float32 reward and flag each")
        # float32 observations (every native env) are read through one float32 view.
        self.f32_obs = obs.dtype == np.float32
        self.obs_end, self.obs_shape = obs.size, obs.shape
        self.flags = (reward.offset, terminated.offset, truncated.offset)
        self.reset = jax.jit(functools.partial(_reset, env, self.layout, self.params_layout))
        self.step = jax.jit(functools.partial(_step, env, self.layout))
        self.with_params = jax.jit(functools.partial(_with_params, self.layout, self.params_layout))
        self.unpack = jax.jit(self.layout.unpack)
        self.table = {}
        if isinstance(self.space, spaces.Discrete) and self.space.n <= _MAX_TABLE:
            self.table = {a: jax.device_put(np.int32(a)) for a in range(self.space.n)}

    def __reduce__(self):
        return programs, (self.env,)

    def device_action(self, action: np.ndarray) -> Any:
        """A checked action (numpy, the space's dtype) as the step's argument."""
        return self.table[int(action)] if self.table else action

    def outputs(self, words: jax.Array) -> tuple[np.ndarray, float, bool, bool]:
        """(obs, reward, terminated, truncated) from the buffer: one host view, obs copied."""
        host = np.asarray(words)
        r, te, tr = self.flags
        if self.f32_obs:
            floats = host.view(np.float32)
            obs = floats[: self.obs_end].reshape(self.obs_shape)
            return obs.copy(), float(floats[r]), bool(host[te]), bool(host[tr])
        obs = self.layout.host_leaf(host, 0)
        return (
            obs.copy(),
            float(host[r : r + 1].view(np.float32)[0]),
            bool(host[te]),
            bool(host[tr]),
        )


@functools.cache
def programs(env: Env) -> Programs:
    """The `Programs` of `env` (cached: instances of one environment share compilations)."""
    return Programs(env)
