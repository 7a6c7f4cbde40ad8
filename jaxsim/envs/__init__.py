"""The environment registry: one explicit dict of ids, and `make`."""

from __future__ import annotations

from jaxsim.core import Env
from jaxsim.envs.classic_control import (
    Acrobot,
    CartPole,
    MountainCar,
    MountainCarContinuous,
    Pendulum,
)

REGISTRY: dict[str, type[Env]] = {
    cls.id: cls for cls in (CartPole, Pendulum, MountainCar, MountainCarContinuous, Acrobot)
}


def registered_ids() -> list[str]:
    return sorted(REGISTRY)


def make(env_id: str, **overrides) -> Env:
    """Builds a registered environment; `overrides` replace fields of its default params.

    Example: `make("CartPole-v1", max_episode_steps=200, gravity=9.81)`.
    """
    try:
        cls = REGISTRY[env_id]
    except (KeyError, TypeError):
        raise ValueError(
            f"make: unknown environment id {env_id!r}; known ids are {registered_ids()}"
        ) from None
    return cls(**overrides)
