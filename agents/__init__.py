"""Agents on jaxsim's public API only: PPO, DQN, SAC, PQN, trained by `python -m agents.train`."""

from agents.checkpoint import load_checkpoint, load_policy, save_checkpoint
from agents.dqn import DQN, DQNConfig
from agents.networks import make_actor_critic, to_policy
from agents.ppo import PPO, Metrics, PPOConfig, RunnerState, make_train
from agents.pqn import PQN, PQNConfig
from agents.sac import SAC, SACConfig
from jaxsim.policies import init_mlp, mlp_apply  # the layers every agent's networks use

__all__ = [
    "DQN",
    "PPO",
    "PQN",
    "SAC",
    "DQNConfig",
    "Metrics",
    "PPOConfig",
    "PQNConfig",
    "RunnerState",
    "SACConfig",
    "init_mlp",
    "load_checkpoint",
    "load_policy",
    "make_actor_critic",
    "make_train",
    "mlp_apply",
    "save_checkpoint",
    "to_policy",
]
