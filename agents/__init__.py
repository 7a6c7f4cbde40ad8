"""Agents on jaxsim's public API only: PPO (`agents.ppo`), trained by `python -m agents.train`."""

from agents.checkpoint import load_checkpoint, load_policy, save_checkpoint
from agents.networks import ActorCritic, make_network, to_policy
from agents.ppo import PPO, Metrics, PPOConfig, RunnerState, make_train

__all__ = [
    "PPO",
    "ActorCritic",
    "Metrics",
    "PPOConfig",
    "RunnerState",
    "load_checkpoint",
    "load_policy",
    "make_network",
    "make_train",
    "save_checkpoint",
    "to_policy",
]
