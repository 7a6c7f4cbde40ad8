"""Agents on jaxsim's public API only: PPO (`agents.ppo`), trained by `python -m agents.train`."""

from agents.checkpoint import load_checkpoint, load_policy, save_checkpoint
from agents.networks import make_actor_critic, to_policy
from agents.ppo import PPO, Metrics, PPOConfig, RunnerState, make_train
from jaxsim.policies import init_mlp, mlp_apply  # the layers every agent's networks use

__all__ = [
    "PPO",
    "Metrics",
    "PPOConfig",
    "RunnerState",
    "init_mlp",
    "load_checkpoint",
    "load_policy",
    "make_actor_critic",
    "make_train",
    "mlp_apply",
    "save_checkpoint",
    "to_policy",
]
