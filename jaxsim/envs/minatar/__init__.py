"""MinAtar natively: the original's games as pure-JAX environments, ids "MinAtar/<Game>-v0"."""

from __future__ import annotations

from jaxsim.envs.minatar.asterix import Asterix
from jaxsim.envs.minatar.base import MinAtarEnv, MinAtarParams, minimal_variant
from jaxsim.envs.minatar.breakout import Breakout
from jaxsim.envs.minatar.freeway import Freeway
from jaxsim.envs.minatar.seaquest import Seaquest
from jaxsim.envs.minatar.space_invaders import SpaceInvaders

# Each game with the full action set ("-v0") and the minimal one ("-v1"), as the original's ids.
GAMES: tuple[type[MinAtarEnv], ...] = (Asterix, Breakout, Freeway, SpaceInvaders, Seaquest)
ENVS: tuple[type[MinAtarEnv], ...] = tuple(
    cls for game in GAMES for cls in (game, minimal_variant(game))
)

__all__ = [
    "ENVS",
    "GAMES",
    "Asterix",
    "Breakout",
    "Freeway",
    "MinAtarEnv",
    "MinAtarParams",
    "Seaquest",
    "SpaceInvaders",
]
