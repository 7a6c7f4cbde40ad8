"""PPO's math as pure functions: GAE, the clipped policy loss, the value loss, the entropy bonus."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def gae(
    reward: jax.Array,
    value: jax.Array,
    next_value: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    gamma: float,
    gae_lambda: float,
) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimation over a rollout with same-step auto-reset.

    A terminated step has no future (no bootstrap). A truncated step bootstraps from
    `next_value`, the critic at the true next observation (`Trajectory.next_obs`), not at
    `obs[t + 1]`, which after auto-reset belongs to a new episode. Either way the recursion stops
    at an episode boundary. After the last step the horizon cuts the sum (bootstrapping from
    `next_value[T - 1]` through its delta).

    Args:
      reward: [T, B] rewards.
      value: [T, B] critic at obs[t].
      next_value: [T, B] critic at next_obs[t].
      terminated: [T, B] bool, the MDP ended at step t.
      truncated: [T, B] bool, the time limit cut the episode at step t.
      gamma: discount.
      gae_lambda: GAE's lambda.

    Returns:
      (advantage[T, B], target[T, B]) with target = advantage + value (the lambda-return).
    """
    not_terminated = 1.0 - terminated.astype(jnp.float32)
    not_done = 1.0 - (terminated | truncated).astype(jnp.float32)
    delta = reward + gamma * not_terminated * next_value - value
    decay = gamma * gae_lambda * not_done

    def step(next_advantage, x):
        delta_t, decay_t = x
        advantage = delta_t + decay_t * next_advantage
        return advantage, advantage

    _, advantage = jax.lax.scan(
        step, jnp.zeros_like(delta[0]), (delta, decay), reverse=True, unroll=8
    )
    return advantage, advantage + value


def clipped_policy_loss(
    log_prob: jax.Array, old_log_prob: jax.Array, advantage: jax.Array, clip_eps: float
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """PPO's clipped surrogate, to minimise.

    Args:
      log_prob: [N] log pi(a|s) under the current parameters.
      old_log_prob: [N] log pi(a|s) under the parameters that collected the data.
      advantage: [N] advantage estimates (already normalised if wanted).
      clip_eps: ratio clipping range.

    Returns:
      (loss scalar, approx_kl scalar, clip_fraction scalar). approx_kl is the low-variance
      estimator E[(r - 1) - log r].
    """
    log_ratio = log_prob - old_log_prob
    ratio = jnp.exp(log_ratio)
    unclipped = ratio * advantage
    clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantage
    loss = -jnp.minimum(unclipped, clipped).mean()
    approx_kl = ((ratio - 1.0) - log_ratio).mean()
    clip_fraction = (jnp.abs(ratio - 1.0) > clip_eps).astype(jnp.float32).mean()
    return loss, approx_kl, clip_fraction


def value_loss(
    value: jax.Array, old_value: jax.Array, target: jax.Array, clip_eps: float | None
) -> jax.Array:
    """Half mean squared error to the targets, optionally clipped around the old values.

    Args:
      value: [N] critic under the current parameters.
      old_value: [N] critic under the parameters that collected the data.
      target: [N] lambda-returns.
      clip_eps: if not None, take the larger of the plain and the clipped error (as PPO2).

    Returns:
      The loss, a scalar.
    """
    error = (value - target) ** 2
    if clip_eps is not None:
        clipped = old_value + jnp.clip(value - old_value, -clip_eps, clip_eps)
        error = jnp.maximum(error, (clipped - target) ** 2)
    return 0.5 * error.mean()


def entropy_bonus(entropy: jax.Array) -> jax.Array:
    """Mean policy entropy ([N] -> scalar), added to the objective with `ent_coef`."""
    return entropy.mean()


def normalize_advantage(advantage: jax.Array) -> jax.Array:
    """[N] -> [N] with zero mean and unit std (over the minibatch)."""
    return (advantage - advantage.mean()) / (advantage.std() + 1e-8)
