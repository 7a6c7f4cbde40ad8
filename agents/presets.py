"""Per-environment PPO settings that solve the task; command-line flags override them."""

from __future__ import annotations

from typing import Any

from agents.ppo import PPOConfig

# purejaxrl's CartPole settings (the PPOConfig defaults).
_CARTPOLE: dict[str, Any] = {}

_PENDULUM: dict[str, Any] = dict(
    total_steps=1_000_000,
    num_envs=16,
    num_steps=256,
    update_epochs=10,
    num_minibatches=16,
    learning_rate=1e-3,
    gamma=0.95,
    gae_lambda=0.95,
    ent_coef=0.0,
    clip_value=False,
    normalize_obs=True,
    scale_rewards=True,
    log_every=10,  # updates are ~30x heavier than CartPole's
)

PRESETS: dict[str, dict[str, Any]] = {
    "CartPole-v1": _CARTPOLE,
    "Pendulum-v1": _PENDULUM,
}


def config_for(env_id: str, **overrides) -> PPOConfig:
    """The preset for `env_id` (PPOConfig defaults if none) with `overrides` applied."""
    return PPOConfig(**{**PRESETS.get(env_id, {}), **overrides})
