"""The environment registry: one explicit dict of native ids, adapter prefixes, and `make`."""

from __future__ import annotations

import importlib

from jaxsim.core import Env
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
