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
import functools
import importlib
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxsim import params as params_lib
from jaxsim.core import Env
from jaxsim.rng import Draws
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
    draws = Draws(reset="key")  # the library's reset takes a key
    library: ClassVar[str]  # e.g. "gymnax": its pip extra is jaxsim-rl[<library>]

    def obs_fields(self, state: AdapterState, params) -> jax.Array:
        return state.obs  # one array: the whole observation, whatever its shape


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


def adapter_class(base: type, env_id: str, params_fields: dict, config_fields=None, **attrs):
    """The subclass of `base` wrapping one library environment (one class per id, so equal
    environments hash equal): its declared params and, if given, static config.

    `params_fields` and `config_fields` are as `declared_dataclass` takes them; `attrs` are
    further class attributes (e.g. the library's environment object).
    """
    name = base.__name__.removesuffix("Env") + "".join(
        c for c in env_id.split("/", 1)[1].title() if c.isalnum()
    )
    namespace = {
        "id": env_id,
        "params_type": declared_dataclass(f"{name}Params", params_fields, f"Params of {env_id}."),
        "__doc__": f"{env_id} through jaxsim (see {base.__module__}).",
        **attrs,
    }
    if config_fields is not None:
        namespace["config_type"] = declared_dataclass(
            f"{name}Config", config_fields, f"Static config of {env_id}.", pytree=False
        )
    return type(name, (base,), namespace)


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


def config_dict(config) -> dict:
    """A static-config dataclass as a dict of its fields."""
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


class StateStepEnv(AdapterEnv):
    """Adapters of libraries whose `reset(key) -> State` and `step(State, action) -> State`
    carry `obs`, `reward` and `done` in the State (brax, MuJoCo Playground).

    The library's environment object is built from the static config (`_build`), once per
    config. `done` is termination: the library's own time limit is a wrapper jaxsim does not use.
    Their reset runs the physics pipeline's init, so a batch resets only its done environments
    while few are (`compact_reset`; brax ant at 256 envs: 0.91x of brax's own loop without it).
    """

    compact_reset = True
    # No YNNPACK fusions (jaxlib 0.10's XLA:CPU hands batched dots and reductions to YNNPACK):
    # in the physics pipeline's own loops each costs a library call per iteration. brax
    # inverted_pendulum, 2048 envs, one jitted step: 162 ms with them, 12 ms without. brax ant
    # is mixed: its rollout alone ran 1.15-1.22x faster with them (2048 envs, interleaved), but
    # PPO's loop at brax's ant settings took 91.5 s an update with them against 53-68 s without
    # (the peers suite's ant case, one update each, 2026-12-02), so they stay off for all.
    cpu_compiler_options: ClassVar[dict[str, Any]] = {"xla_cpu_experimental_ynn_fusion_type": ""}

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        config = tuple(sorted(config_dict(self.config).items()))
        self._inner_env, self._observation_space, self._action_space = self._inner(config)

    @classmethod
    @functools.cache
    def _inner(cls, config: tuple):
        """The library's environment for `config` and its (observation, action) spaces, read
        once per config, outside any trace (the libraries keep the control range as an array).

        The observation's shape comes from tracing a reset abstractly: the libraries' own
        `observation_size` runs a reset eagerly, op by op (brax inverted_pendulum: 221 small
        compiles, and `make` took 7.7 s on a 2-core CPU; 0.2 s traced, 2026-12-02)."""
        inner = cls._build(config)
        obs = jax.eval_shape(inner.reset, jax.ShapeDtypeStruct((2,), jnp.uint32)).obs
        if not (isinstance(obs, jax.ShapeDtypeStruct) and obs.ndim == 1):
            shapes = jax.tree.map(lambda x: x.shape, obs)
            raise ValueError(
                f"{cls.id}: observations are {shapes}; the adapter serves environments whose "
                "observation is one vector"
            )
        ctrl_range = np.asarray(cls._ctrl_range(inner), np.float32)
        action_space = box(ctrl_range[:, 0], ctrl_range[:, 1], (inner.action_size,))
        return inner, box(-np.inf, np.inf, obs.shape), action_space

    @classmethod
    def _build(cls, config: tuple):
        """The library's environment for static config `config` ((name, value) pairs)."""
        raise NotImplementedError

    @staticmethod
    def _ctrl_range(inner_env):
        """float[action_size, 2]: each actuator's (low, high)."""
        raise NotImplementedError

    def init_state(self, key, params) -> AdapterState:
        inner = strong_types(self._inner_env.reset(key))
        return AdapterState(inner, float_obs(inner.obs), jnp.int32(0))

    def dynamics(self, state: AdapterState, action, params):
        inner = strong_types(self._inner_env.step(state.inner, action))
        next_state = AdapterState(inner, float_obs(inner.obs), state.time)
        return next_state, inner.reward, inner.done > 0.5

    def observation_space(self, params):
        return self._observation_space

    def action_space(self, params):
        return self._action_space
