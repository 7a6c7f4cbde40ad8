"""The environment registry: one explicit dict of native ids, adapter prefixes, and `make`."""

from __future__ import annotations

import functools
import importlib
import sys
from typing import Any

from jaxsim.contract import check_outputs
from jaxsim.core import Env
from jaxsim.cpu_threads import LAPACK_SAFE_THREADS, ensure_cpu_threads
from jaxsim.envs.classic_control import (
    Acrobot,
    CartPole,
    CartPoleNoVel,
    MountainCar,
    MountainCarContinuous,
    Pendulum,
)
from jaxsim.envs.minatar import ENVS as MINATAR
from jaxsim.envs.swarm import SIZED, Swarm

_NATIVE = (
    CartPole,
    CartPoleNoVel,
    Pendulum,
    MountainCar,
    MountainCarContinuous,
    Acrobot,
    Swarm,
    *SIZED,
)
_BUILTIN = (*_NATIVE, *MINATAR)
NATIVE_IDS = tuple(sorted(cls.id for cls in _BUILTIN))  # the ids jaxsim ships
REGISTRY: dict[str, Any] = {cls.id: cls for cls in _BUILTIN}  # id -> what builds it

# "<prefix>/<name>" ids wrap another library's environments; each module is imported (and
# imports its library) only when `make` is given its prefix. Install with jaxsim-rl[<prefix>].
ADAPTERS: dict[str, str] = {
    "gymnax": "jaxsim.envs.gymnax_adapter",
    "brax": "jaxsim.envs.brax_adapter",
    "playground": "jaxsim.envs.playground_adapter",
}


# Adapter prefixes whose programs need more XLA CPU threads than one, and why (read from the id
# alone: a command sizes the pool before it imports the library or starts JAX).
_CPU_THREADS = {
    "brax": (
        LAPACK_SAFE_THREADS,
        "brax's physics runs batched LAPACK kernels (Cholesky, triangular solves), which "
        "deadlock a smaller pool: docs/upstream_jaxlib_lapack_deadlock.md",
    ),
}


def cpu_threads_needed(env_id: str) -> tuple[int, str]:
    """(the fewest XLA CPU pool threads programs stepping `env_id` run safely on, why): (1, "")
    for most; brax's ids need `jaxsim.cpu_threads.LAPACK_SAFE_THREADS`. Imports nothing and
    starts nothing; `size_cpu_pool` passes it to `jaxsim.cpu_threads.ensure_cpu_threads`."""
    prefix, slash, _ = env_id.partition("/") if isinstance(env_id, str) else ("", "", "")
    return _CPU_THREADS.get(prefix, (1, "")) if slash else (1, "")


def size_cpu_pool(*env_ids: str) -> str | None:
    """`ensure_cpu_threads` with the most threads any of `env_ids` needs (`cpu_threads_needed`):
    for a program that owns its process, before JAX starts. Returns its sentence, or None."""
    needs = [cpu_threads_needed(env_id) for env_id in env_ids]
    threads, reason = max(needs, key=lambda need: need[0], default=(1, ""))
    return ensure_cpu_threads(threads, reason)


def registered_ids() -> list[str]:
    """The registered ids: the native environments' and the user's (`register`). Adapters add
    "<prefix>/<name>" ids (see `ADAPTERS`), and "package.module:Class" names any Env class."""
    return sorted(REGISTRY)


# A user registration's defaults (`register(id, entry_point, **defaults)`), by id.
_DEFAULTS: dict[str, dict] = {}


def register(env_id: str, entry_point, **defaults) -> str:
    """Makes an environment of the user's a first-class id: `jaxsim.make(env_id)`, both
    backends, the Gymnasium front (`gymnasium.make("jaxsim/<env_id>")`), the vector and SB3
    envs, and the agents' commands (`python -m agents.train ppo --env <env_id>`).

    Args:
      env_id: the id, a string without spaces (a slash at most once, as "Family/Name-v0").
      entry_point: a `jaxsim.Env` subclass, a `"package.module:Class"` string naming one
        (imported when first made), or a gymnax environment (object or class), wrapped by the
        gymnax adapter.
      defaults: params overrides and static config the id makes by default (`make`'s keyword
        arguments override them), validated when the id is made.

    Returns:
      `env_id`. Registering an id twice replaces its entry (a native id cannot be replaced).
    """
    if not isinstance(env_id, str) or not env_id or any(c.isspace() for c in env_id):
        raise ValueError(f"register: env_id must be a non-empty str without spaces, got {env_id!r}")
    if env_id.count("/") > 1 or env_id.partition("/")[0] in ADAPTERS or ":" in env_id:
        raise ValueError(
            f"register: env_id {env_id!r} must have at most one slash, no ':' and no adapter "
            f"prefix ({sorted(ADAPTERS)})"
        )
    if any(cls.id == env_id for cls in _BUILTIN):
        raise ValueError(f"register: {env_id!r} is a native id of jaxsim; choose another")
    REGISTRY[env_id] = _entry(entry_point, f"register({env_id!r})")
    _DEFAULTS[env_id] = dict(defaults)
    gym_front = sys.modules.get("jaxsim.gymnasium")
    if gym_front is not None:  # already imported: Gymnasium knows the id at once
        gym_front.register(env_id)
    return env_id


def _entry(entry_point, owner: str):
    """The callable that builds an environment from `entry_point` (see `register`)."""
    if isinstance(entry_point, str):
        module, colon, name = entry_point.partition(":")
        if not (colon and module and name):
            raise ValueError(
                f"{owner}: entry_point must be 'package.module:Class', got {entry_point!r}"
            )
        return functools.partial(_load, entry_point)
    if isinstance(entry_point, type) and issubclass(entry_point, Env):
        return entry_point
    if _is_gymnax(entry_point):
        return functools.partial(_gymnax, entry_point)
    raise TypeError(
        f"{owner}: entry_point must be a jaxsim.Env subclass, a 'package.module:Class' string or a "
        f"gymnax environment, got {entry_point!r}"
    )


def _load(spec: str, **kwargs) -> Env:
    module, _, name = spec.partition(":")
    try:
        obj = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"make({spec!r}): cannot import {name} from {module}: {err}") from err
    if isinstance(obj, type) and issubclass(obj, Env):
        env = obj(**kwargs)
        if env.id == type(env).__name__:  # unnamed: the spec rebuilds it
            env.id = spec
    elif _is_gymnax(obj):
        env = _gymnax(obj, **kwargs)
        env.id = spec
    else:
        raise TypeError(f"make({spec!r}): {name} is not a jaxsim.Env subclass nor a gymnax env")
    return env


def _is_gymnax(obj) -> bool:
    cls = obj if isinstance(obj, type) else type(obj)
    return any(
        base.__module__.startswith("gymnax.") and base.__name__ == "Environment"
        for base in cls.__mro__
    )


def _gymnax(obj, **kwargs) -> Env:
    from jaxsim.envs import gymnax_adapter

    return gymnax_adapter.make_from(obj, **kwargs)


def make(env_id, **overrides) -> Env:
    """Builds an environment; `overrides` are fields of its params or static config.

    Examples: `make("CartPole-v1", max_episode_steps=200, gravity=9.81)`,
    `make("gymnax/Breakout-MinAtar")`, `make("brax/ant", backend="positional")`,
    `make("my_package.envs:Catch")` (any `jaxsim.Env` subclass or gymnax environment by its
    import path), or an id of the user's (`jaxsim.register`). What the environment returns is
    checked against its spaces once per class (`jaxsim.contract.check_outputs`).
    """
    env = build(env_id, **overrides)
    check_outputs(env)
    return env


def build(env_id, **overrides) -> Env:
    """`make` without the check of its outputs (for reading declarations: a time limit)."""
    entry = REGISTRY.get(env_id) if isinstance(env_id, str) else None
    if entry is not None:
        env = entry(**(_DEFAULTS.get(env_id, {}) | overrides))
        if env.id != env_id:  # a user's class registered under its own name
            env.id = env_id
        return env
    prefix, slash, name = env_id.partition("/") if isinstance(env_id, str) else ("", "", "")
    if slash and prefix in ADAPTERS and name:
        return importlib.import_module(ADAPTERS[prefix]).make(name, **overrides)
    if isinstance(env_id, str) and ":" in env_id:
        return _entry(env_id, f"make({env_id!r})")(**overrides)
    raise ValueError(
        f"make: unknown environment id {env_id!r}; registered ids are {registered_ids()}, "
        f"adapters take {[f'{p}/<name>' for p in ADAPTERS]} (e.g. 'gymnax/Breakout-MinAtar', "
        "'brax/ant'), and 'package.module:Class' names an Env class (jaxsim.register adds ids)"
    )
