"""Per-algorithm, per-environment settings that solve the task; command-line flags override them.

Each preset states its source. Where it departs from the source (to run as a vectorised
rollout, or cheaper), the comment says how; the learning figures are in agents/README.md.
"""

from __future__ import annotations

from typing import Any

from agents.algorithms import agent_type

# PPO, CartPole-v1: purejaxrl's settings (the PPOConfig defaults).
_PPO_PENDULUM: dict[str, Any] = dict(
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

# SAC, MountainCarContinuous-v0: rl-zoo's sac.yml (50k steps, lr 3e-4, buffer 50k, batch 512,
# fixed ent_coef 0.1, train_freq = gradient_steps = 32, gamma 0.9999, tau 0.01, net [64, 64])
# without its gSDE exploration (use_sde, log_std_init -3.67), which agents/sac.py does not
# have, and with learning_starts 512 (rl-zoo: 0) so a minibatch fits in the buffer.
_SAC_MOUNTAINCAR: dict[str, Any] = dict(
    total_steps=50_000,
    num_envs=1,
    num_steps=32,
    gradient_steps=32,
    learning_rate=3e-4,
    buffer_size=50_000,
    batch_size=512,
    learning_starts=512,
    init_alpha=0.1,
    learn_alpha=False,
    gamma=0.9999,
    tau=0.01,
    hidden=(64, 64),
)

PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "ppo": {"CartPole-v1": {}, "Pendulum-v1": _PPO_PENDULUM},
    # rl-zoo's dqn.yml CartPole-v1 (the DQNConfig defaults).
    "dqn": {"CartPole-v1": {}},
    # rl-zoo's sac.yml Pendulum-v1 (the SACConfig defaults).
    "sac": {"Pendulum-v1": {}, "MountainCarContinuous-v0": _SAC_MOUNTAINCAR},
}


def config_for(env_id: str, algorithm: str = "ppo", **overrides):
    """`algorithm`'s preset for `env_id` (its config defaults if none) with `overrides` applied."""
    config_type = agent_type(algorithm).config_type
    return config_type(**{**PRESETS[algorithm].get(env_id, {}), **overrides})
