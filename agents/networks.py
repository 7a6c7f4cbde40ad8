"""The PPO actor-critic: a flax module for its weights, `jaxsim.MLPPolicy` for its math.

`ActorCritic` owns initialisation and the parameter tree that optax updates and checkpoints
store. `to_policy` turns that tree into a `jaxsim.MLPPolicy`, which both the rollout (sampling)
and the loss (`evaluate`: log-probabilities, entropy, value) use, so the distribution math exists
once. A test checks that the module's forward pass equals the policy's.
"""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

import jaxsim
from agents.normalizers import RunningStats, standard_deviation

orthogonal = jaxsim.orthogonal_init


class ActorCritic(nn.Module):
    """Separate tanh MLPs for actor and critic, orthogonal init as `jaxsim.init_mlp_policy`.

    Discrete action spaces get logits of a categorical; Box spaces the mean of a diagonal
    Gaussian with a state-independent `log_std` parameter. Gaussian samples are not squashed:
    the environment clips them to its bounds, so log-probabilities stay exact.
    """

    action_dim: int
    discrete: bool
    hidden: tuple[int, ...] = (64, 64)
    init_log_std: float = 0.0

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        """obs[..., obs_dim] -> (logits or mean [..., action_dim], value [...])."""
        hidden_init = orthogonal(math.sqrt(2.0))
        x = obs
        for i, width in enumerate(self.hidden):
            x = jnp.tanh(nn.Dense(width, kernel_init=hidden_init, name=f"actor_{i}")(x))
        out = nn.Dense(self.action_dim, kernel_init=orthogonal(0.01), name="actor_out")(x)
        v = obs
        for i, width in enumerate(self.hidden):
            v = jnp.tanh(nn.Dense(width, kernel_init=hidden_init, name=f"critic_{i}")(v))
        value = nn.Dense(1, kernel_init=orthogonal(1.0), name="critic_out")(v)
        if not self.discrete:
            self.param("log_std", nn.initializers.constant(self.init_log_std), (self.action_dim,))
        return out, value[..., 0]


def make_network(
    env: jaxsim.Env, env_params=None, hidden=(64, 64), init_log_std: float = 0.0
) -> ActorCritic:
    """The ActorCritic for `env`, or a ValueError if its spaces are not ones an MLP serves."""
    env_params = env.default_params if env_params is None else env_params
    obs_space = env.observation_space(env_params)
    if not isinstance(obs_space, jaxsim.Box) or len(obs_space.shape) != 1:
        raise ValueError(
            f"PPO: {env.id} has observation space {obs_space}; the MLP actor-critic needs a "
            "Box of rank 1 (a flat vector)"
        )
    space = env.action_space(env_params)
    if isinstance(space, jaxsim.Discrete):
        return ActorCritic(space.n, True, tuple(hidden), init_log_std)
    if isinstance(space, jaxsim.Box) and len(space.shape) == 1:
        return ActorCritic(space.shape[0], False, tuple(hidden), init_log_std)
    raise ValueError(
        f"PPO: {env.id} has action space {space}; the actor-critic serves Discrete spaces and "
        "Box spaces of rank 1"
    )


def _layers(params: dict, prefix: str) -> tuple:
    num_hidden = sum(1 for name in params if name.startswith(prefix) and name[-1].isdigit())
    names = [f"{prefix}_{i}" for i in range(num_hidden)] + [f"{prefix}_out"]
    return tuple((params[n]["kernel"], params[n]["bias"]) for n in names)


def _fold_normalizer(layers: tuple, stats: RunningStats) -> tuple:
    # W @ ((x - mean) / std) + b == (W / std) @ x + (b - (mean / std) @ W): the rollout sees raw
    # observations and still runs a plain MLPPolicy (which a fused kernel can evaluate).
    (w, b), *rest = layers
    std = standard_deviation(stats)
    w_folded = w / std[:, None]
    b_folded = b - (stats.mean / std) @ w
    return ((w_folded, b_folded), *rest)


def to_policy(
    variables: dict, obs_stats: RunningStats | None = None, deterministic: bool = False
) -> jaxsim.MLPPolicy:
    """The `jaxsim.MLPPolicy` with the ActorCritic's weights.

    Args:
      variables: `ActorCritic.init(...)` output (or its "params" entry).
      obs_stats: if given, observations are normalised by these running statistics, folded into
        the first layers so the policy takes raw observations.
      deterministic: argmax / mean actions instead of samples (evaluation).

    Returns:
      An MLPPolicy whose `evaluate(obs[B, obs_dim], action[B, ...])` gives
      (log_prob[B], entropy[B], value[B]), differentiable with respect to `variables`.
    """
    params = variables.get("params", variables)
    actor = _layers(params, "actor")
    critic = _layers(params, "critic")
    if obs_stats is not None:
        actor = _fold_normalizer(actor, obs_stats)
        critic = _fold_normalizer(critic, obs_stats)
    return jaxsim.MLPPolicy(
        actor=actor,
        critic=critic,
        log_std=params.get("log_std"),
        deterministic=deterministic,
    )
