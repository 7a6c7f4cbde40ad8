"""The agents' math as pure functions: PPO's GAE, clipped policy loss, value loss and entropy
bonus; DQN's double-Q target; SAC's squashed-Gaussian log-probability, target and losses."""

from __future__ import annotations

import math

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


# ---------------------------------------------------------------------------------- off-policy
# Targets bootstrap unless the transition terminated: a truncated one (time limit) bootstraps from
# its true next observation (`Trajectory.next_obs`), which is what the buffer stores.
def double_q_target(
    reward: jax.Array,
    terminated: jax.Array,
    next_q_online: jax.Array,
    next_q_target: jax.Array,
    gamma: float,
) -> jax.Array:
    """Double DQN's target: the online network picks the next action, the target one values it.

    Args:
      reward: [B] rewards.
      terminated: [B] bool; truncated transitions are not terminated and bootstrap.
      next_q_online: [B, num_actions] online Q at next_obs.
      next_q_target: [B, num_actions] target Q at next_obs.
      gamma: discount.

    Returns:
      [B] r + gamma * (1 - terminated) * Q_target(s', argmax_a Q_online(s', a)), no gradient.
    """
    best = jnp.argmax(next_q_online, axis=-1)
    next_value = jnp.take_along_axis(next_q_target, best[:, None], axis=-1)[:, 0]
    target = reward + gamma * (1.0 - terminated.astype(jnp.float32)) * next_value
    return jax.lax.stop_gradient(target)


def squashed_gaussian_log_prob(mean: jax.Array, log_std: jax.Array, u: jax.Array) -> jax.Array:
    """log-density of a = tanh(u), u ~ N(mean, exp(log_std)^2), per action vector.

    log pi(a) = sum_i [log N(u_i; mean_i, std_i) - log(1 - tanh(u_i)^2)], with the Jacobian term
    written as 2 (log 2 - u - softplus(-2u)), exact and finite where tanh(u) rounds to +-1.

    Args:
      mean, log_std, u: [B, action_dim] (u is the pre-squash sample).

    Returns:
      [B] log-probabilities of the squashed actions (in [-1, 1] units).
    """
    z = (u - mean) * jnp.exp(-log_std)
    gaussian = -0.5 * z**2 - log_std - 0.5 * math.log(2 * math.pi)
    log_det = 2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))
    return jnp.sum(gaussian - log_det, axis=-1)


def sac_target(
    reward: jax.Array,
    terminated: jax.Array,
    next_q1: jax.Array,
    next_q2: jax.Array,
    next_log_prob: jax.Array,
    alpha: jax.Array,
    gamma: float,
) -> jax.Array:
    """SAC's soft target from twin target critics at the next observation.

    Args:
      reward: [B]; terminated: [B] bool (truncated transitions bootstrap).
      next_q1, next_q2: [B] target critics at (next_obs, a'), a' ~ pi(.|next_obs).
      next_log_prob: [B] log pi(a'|next_obs).
      alpha: scalar temperature.
      gamma: discount.

    Returns:
      [B] r + gamma * (1 - terminated) * (min(q1, q2) - alpha * log pi(a')), no gradient.
    """
    soft_value = jnp.minimum(next_q1, next_q2) - alpha * next_log_prob
    target = reward + gamma * (1.0 - terminated.astype(jnp.float32)) * soft_value
    return jax.lax.stop_gradient(target)


def sac_actor_loss(log_prob: jax.Array, q: jax.Array, alpha: jax.Array) -> jax.Array:
    """mean(alpha * log pi(a|s) - min Q(s, a)) over [B] reparameterised samples -> scalar."""
    return jnp.mean(alpha * log_prob - q)


def temperature_loss(log_alpha: jax.Array, log_prob: jax.Array, target_entropy: float):
    """-mean(log_alpha * (log pi + target_entropy)) with log pi [B] held fixed -> scalar: raises
    alpha while the policy's entropy is below the target, lowers it above (as SB3's SAC)."""
    return -jnp.mean(log_alpha * jax.lax.stop_gradient(log_prob + target_entropy))


# ----------------------------------------------------------------------------- a gradient step
def gradient_step(loss_fn, optimizer, params, opt_state):
    """One optimiser step on `loss_fn(params) -> (scalar loss, info)`, its phases named for the
    profiler (`loss`, `backward`, `optimizer`) -> (params, opt_state, info).

    The backward pass is `jax.vjp`'s, so the forward pass runs once; every agent's minibatch
    step is this function on its own loss.
    """
    import optax

    with jax.named_scope("loss"):
        loss, vjp_fn, info = jax.vjp(loss_fn, params, has_aux=True)
    with jax.named_scope("backward"):
        (grads,) = vjp_fn(jnp.ones_like(loss))
    with jax.named_scope("optimizer"):
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
    return params, opt_state, info
