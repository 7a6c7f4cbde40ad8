"""The environment registry: one explicit dict of native ids, adapter prefixes, and `make`."""

from __future__ import annotations

import importlib

from jaxsim.core import Env
from jaxsim.cpu_threads import LAPACK_SAFE_THREADS, ensure_cpu_threads
from jaxsim.envs.classic_control import (
    Acrobot,
    CartPole,
    MountainCar,
    MountainCarContinuous,
    Pendulum,
)
from jaxsim.envs.minatar import ENVS as MINATAR
from jaxsim.envs.swarm import SIZED, Swarm

_NATIVE = (CartPole, Pendulum, MountainCar, MountainCarContinuous, Acrobot, Swarm, *SIZED)
REGISTRY: dict[str, type[Env]] = {cls.id: cls for cls in (*_NATIVE, *MINATAR)}

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
    """The native environments' ids (adapters add "<prefix>/<name>" ids, see `ADAPTERS`)."""
    return sorted(REGISTRY)


def make(env_id: str, **overrides) -> Env:
    """Builds an environment; `overrides` are fields of its params or static config.

    Examples: `make("CartPole-v1", max_episode_steps=200, gravity=9.81)`,
    `make("gymnax/Breakout-MinAtar")`, `make("brax/ant", backend="positional")`.
    """
    cls = REGISTRY.get(env_id) if isinstance(env_id, str) else None
    if cls is not None:
        return cls(**overrides)
    prefix, slash, name = env_id.partition("/") if isinstance(env_id, str) else ("", "", "")
    if slash and prefix in ADAPTERS and name:
        return importlib.import_module(ADAPTERS[prefix]).make(name, **overrides)
    raise ValueError(
        f"make: unknown environment id {env_id!r}; native ids are {registered_ids()}, and "
        f"adapters take {[f'{p}/<name>' for p in ADAPTERS]} (e.g. 'gymnax/Breakout-MinAtar', "
        "'brax/ant')"
    )
