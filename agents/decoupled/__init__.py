"""Actor-learner training on host simulators: actor threads feed PPO's one-jit update."""

from agents.decoupled.host_envs import EXTRA_INSTALL, PREFIXES, MissingDependency, is_host_id
from agents.decoupled.learner import HostPPO, LearnerState
from agents.decoupled.run import SCHEDULES, ActorFailed, DecoupledConfig, run_decoupled

__all__ = [
    "EXTRA_INSTALL",
    "PREFIXES",
    "SCHEDULES",
    "ActorFailed",
    "DecoupledConfig",
    "HostPPO",
    "LearnerState",
    "MissingDependency",
    "is_host_id",
    "run_decoupled",
]
