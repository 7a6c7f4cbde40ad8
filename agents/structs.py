"""The named carries of PPO (runner state, batch, losses) and every agent's per-update Metrics."""

from __future__ import annotations

from typing import Any, ClassVar

import jax
import jax.numpy as jnp
from flax import struct

import jaxsim
from agents.normalizers import RewardScaleState, RunningStats


@struct.dataclass
class RunnerState:
    """Everything a run carries between updates. Under vmap every leaf gains a seed axis."""

    params: Any  # the actor-critic: agents.networks.make_actor_critic
    opt_state: Any
    obs_stats: RunningStats
    reward_state: RewardScaleState
    env_state: jaxsim.RolloutState
    key: jax.Array
    update: jax.Array  # int32: updates done
    last_return: jax.Array  # float32: mean return of the latest finished episodes (NaN: none yet)

    @classmethod
    def start(cls, params, optimizer, obs_norm, reward_scaler, env_state, key) -> RunnerState:
        """A run before its first update: the optimiser's and normalisers' initial states."""
        return cls(
            params=params,
            opt_state=optimizer.init(params),
            obs_stats=obs_norm.init(),
            reward_state=reward_scaler.init(),
            env_state=env_state,
            key=key,
            update=jnp.int32(0),
            last_return=jnp.float32(jnp.nan),
        )


@struct.dataclass
class TrainState:
    """The part of RunnerState that minibatch steps change."""

    params: Any
    opt_state: Any


@struct.dataclass
class Batch:
    """One update's transitions, flattened to [N, ...] (N = num_envs * num_steps)."""

    obs: jax.Array
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    advantage: jax.Array
    target: jax.Array


@struct.dataclass
class LossInfo:
    # Which fields the metrics files and progress rows keep, and under what column names.
    COLUMNS: ClassVar[dict[str, str]] = {
        "policy": "policy_loss",
        "value": "value_loss",
        "entropy": "entropy",
        "approx_kl": "approx_kl",
        "clip_fraction": "clip_fraction",
    }

    total: jax.Array
    policy: jax.Array
    value: jax.Array
    entropy: jax.Array
    approx_kl: jax.Array
    clip_fraction: jax.Array


@struct.dataclass
class Metrics:
    """Per-update diagnostics (scalars; [num_updates] out of `run`, plus a seed axis under vmap)."""

    update: jax.Array
    steps: jax.Array  # env steps so far, per seed
    mean_return: jax.Array  # of the latest finished episodes (NaN until one finishes)
    episodes: jax.Array  # episodes finished in this update's rollout
    loss: Any  # the algorithm's LossInfo (with its COLUMNS): means over the update's steps
