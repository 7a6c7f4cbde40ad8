"""Environments of other JAX libraries as jaxsim environments: what every adapter shares.

An adapter wraps a library's own reset and step functions. jaxsim owns what sits around them:
the time limit (`max_episode_steps`, truncation apart from termination), same-step auto-reset,
counter-based reset keys, per-environment params and the rollout record. The library's state
travels whole inside `AdapterState`, so adapters run on the scan backend (`jax.vmap` over the
batch); the fused kernel, which carries one number per state field, refuses them.

`jaxsim.make("gymnax/<id>")` and `jaxsim.make("brax/<name>")` import their library when called,
never before (`jaxsim.envs.ADAPTERS` names the modules).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxsim import params as params_lib
from jaxsim.core import Env
from jaxsim.spaces import Box, Discrete


@struct.dataclass
class AdapterState:
    """One environment of a wrapped library: its own state, its observation, jaxsim's step count."""

    inner: Any  # the library's state pytree, untouched
    obs: jax.Array  # float32[*obs_shape]: the library's observation of `inner`
    time: jax.Array  # int32: steps since reset; jaxsim's time limit counts them


class AdapterEnv(Env):
    """Base of the adapters: key-based reset, array observations, scan backend only.

    Subclasses set `id`, `params_type` (and `config_type`) and implement `init_state(key,
    params)`, `dynamics` and the spaces; `init_state` and `dynamics` return `AdapterState`s.
    """

    state_type = AdapterState
    reset_with_key = True
    array_obs = True
    num_reset_uniforms = 0  # resets take a key (reset_with_key)
    fused_refusal = (
        "it wraps another library's step function, whose state is a nested pytree; the fused "
        "kernel carries one number per state field"
    )
    library: ClassVar[str]  # e.g. "gymnax": its pip extra is jaxsim-rl[<library>]

    def obs_fields(self, state: AdapterState, params) -> tuple[jax.Array, ...]:
        return (state.obs,)


def import_library(module: str, env_id: str, extra: str):
    """Imports an adapter's library, or raises an ImportError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"make({env_id!r}) needs {module}, which is not installed ({err}); install it with "
            f'pip install "jaxsim-rl[{extra}]"'
        ) from err


def scalar_kind(value) -> type | None:
    """int, float or bool for a scalar params value (Python, numpy or jax), else None."""
    if isinstance(value, bool | np.bool_):
        return bool
    if np.ndim(value) != 0 or not hasattr(np.asarray(value), "dtype"):
        return None
    kind = np.asarray(value).dtype.kind
    return {"b": bool, "i": int, "u": int, "f": float}.get(kind)


def declared_dataclass(name: str, fields: dict[str, tuple], doc: str, pytree: bool = True):
    """A frozen dataclass of `jaxsim.params.field` declarations: params (a pytree) or config.

    Args:
      name: the class name.
      fields: name -> (kind, default, doc, keywords of `jaxsim.params.field`, e.g. {"ge": 1}).
      doc: the class docstring.
      pytree: a flax struct dataclass (params) or a plain frozen dataclass (static config).
    """
    annotations, namespace = {}, {"__doc__": doc}
    for field_name, (kind, default, field_doc, keywords) in fields.items():
        annotations[field_name] = kind
        namespace[field_name] = params_lib.field(kind(default), doc=field_doc, **keywords)
    namespace["__annotations__"] = annotations
    cls = type(name, (), namespace)
    return struct.dataclass(cls) if pytree else dataclasses.dataclass(frozen=True)(cls)


def max_steps_field(default: int, library: str) -> tuple:
    doc = f"time limit: truncated once this many steps are taken (owned by jaxsim, not {library})"
    return (int, int(default), doc, {"ge": 1, "lt": 2**31})


def box(low, high, shape) -> Box:
    """A jaxsim Box from a library's bounds (broadcast to `shape`)."""
    shape = tuple(int(s) for s in shape)
    low = np.broadcast_to(np.asarray(low, np.float32), shape)
    high = np.broadcast_to(np.asarray(high, np.float32), shape)
    return Box(low, high, shape)


def discrete(n) -> Discrete:
    return Discrete(int(n))


def strong_types(tree):
    """`tree` with weakly typed leaves made strong (same dtype).

    A library's step can return weakly typed leaves (brax's `done` and `reward` come from
    Python-float arithmetic) where its reset returned strong ones. Types that differ between a
    fresh state and a stepped one give `rollout(state=...)` a second compile on the first
    chained call; fixed types give it one.
    """
    return jax.tree.map(lambda x: jnp.asarray(x, jnp.result_type(x)), tree)


def float_obs(obs) -> jax.Array:
    return jnp.asarray(obs, jnp.float32)
