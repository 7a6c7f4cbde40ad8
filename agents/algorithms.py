"""The algorithms `agents.train` runs and checkpoints name ("ppo", "dqn", "sac", "pqn") -> class."""

from __future__ import annotations

import importlib

# name -> (module, class); imported on first use, so checkpoint and train load only what they run.
_CLASSES = {
    "ppo": ("agents.ppo", "PPO"),
    "dqn": ("agents.dqn", "DQN"),
    "sac": ("agents.sac", "SAC"),
    "pqn": ("agents.pqn", "PQN"),
    "ppo_rnn": ("agents.ppo_rnn", "PPORNN"),
}
ALGORITHMS = tuple(_CLASSES)


def agent_type(name: str) -> type:
    """The `agents.agent.Agent` subclass of algorithm `name`; a ValueError if it is unknown."""
    if name not in _CLASSES:
        raise ValueError(f"unknown algorithm {name!r}; the algorithms are {list(ALGORITHMS)}")
    module, cls = _CLASSES[name]
    return getattr(importlib.import_module(module), cls)
