"""jaxsim: reinforcement-learning experience at the speed of the hardware."""

from jaxsim import rng, spaces
from jaxsim.core import Env, TimeStep
from jaxsim.envs import make, registered_ids
from jaxsim.fused import FusedConfig
from jaxsim.policies import (
    MLPPolicy,
    OpenLoopPolicy,
    RandomPolicy,
    init_mlp_policy,
    orthogonal_init,
    random_policy,
)
from jaxsim.profile import profile as profile
from jaxsim.rollout import EpisodeStats, RolloutState, Trajectory, initial_state, rollout
from jaxsim.spaces import Box, Discrete

__version__ = "0.1.0"

__all__ = [
    "Box",
    "Discrete",
    "Env",
    "EpisodeStats",
    "FusedConfig",
    "MLPPolicy",
    "OpenLoopPolicy",
    "RandomPolicy",
    "RolloutState",
    "TimeStep",
    "Trajectory",
    "init_mlp_policy",
    "initial_state",
    "make",
    "orthogonal_init",
    "random_policy",
    "registered_ids",
    "rng",
    "rollout",
    "spaces",
]
