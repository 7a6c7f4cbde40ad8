"""Networks as plain pytrees: an MLP is a tuple of (kernel[in, out], bias[out]) layers.

`init_mlp` and `mlp_apply` (from `jaxsim.policies`, where `MLPPolicy` uses them) are pure
functions every agent shares: PPO's actor-critic below, and
equally a Q-network (`sizes=(obs_dim, ..., num_actions)`), a squashed-Gaussian actor (output
`2 * action_dim`, split into mean and log-std) or twin critics (`jax.vmap(init_mlp)` over two
keys, applied to `concat(obs, action)`). The layers are the form `jaxsim.MLPPolicy` holds, so
PPO's parameters become a policy without conversion: `to_policy` only folds the observation
normaliser in. Rollout (sampling) and loss (`MLPPolicy.evaluate`) share one piece of
distribution math.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

import jaxsim
from agents.normalizers import RunningStats, standard_deviation
from jaxsim.policies import init_mlp

Layers = tuple[tuple[jax.Array, jax.Array], ...]
"""An MLP's weights: ((kernel[in, out], bias[out]), ...), first layer first."""

HIDDEN_GAIN = math.sqrt(2.0)
"""Orthogonal-init gain of tanh hidden layers (as `jaxsim.init_mlp_policy`)."""


def make_actor_critic(
    env: jaxsim.Env, env_params=None, hidden: Sequence[int] = (64, 64), init_log_std: float = 0.0
) -> Callable[[jax.Array], dict[str, Any]]:
    """`init(key) -> params` of PPO's actor-critic for `env`; a ValueError if an MLP can't serve it.

    Separate tanh MLPs for actor and critic, initialised as `jaxsim.init_mlp_policy` (gains
    sqrt 2 hidden, 0.01 actor head, 1 critic head; the same key gives the same weights).
    Discrete action spaces get a categorical over the actor's logits; Box spaces a diagonal
    Gaussian around the actor's output with a state-independent `log_std`, not squashed (the
    environment clips actions to its bounds, so log-probabilities stay exact).

    `params` is `{"actor": Layers, "critic": Layers}`, plus `"log_std": [action_dim]` for Box.
    """
    env_params = env.default_params if env_params is None else env_params
    obs_space, space = env.observation_space(env_params), env.action_space(env_params)
    return actor_critic_init(obs_space, space, hidden, init_log_std, env.id)


def actor_critic_init(
    obs_space, space, hidden: Sequence[int], init_log_std: float, env_name: str
) -> Callable[[jax.Array], dict[str, Any]]:
    """`make_actor_critic` from the spaces alone (`env_name` is for errors): what a learner of
    an environment outside JAX (`agents.decoupled`) builds its networks with."""
    if not isinstance(obs_space, jaxsim.Box):
        raise ValueError(
            f"PPO: {env_name} has observation space {obs_space}; the MLP actor-critic needs a "
            "Box (of any shape: it is flattened)"
        )
    if isinstance(space, jaxsim.Discrete):
        action_dim = space.n
    elif isinstance(space, jaxsim.Box) and len(space.shape) == 1:
        action_dim = space.shape[0]
    else:
        raise ValueError(
            f"PPO: {env_name} has action space {space}; the actor-critic serves Discrete spaces "
            "and Box spaces of rank 1"
        )
    obs_dim, hidden = math.prod(obs_space.shape), tuple(hidden)
    hidden_gains = (HIDDEN_GAIN,) * len(hidden)

    def init(key: jax.Array) -> dict[str, Any]:
        k_actor, k_critic = jax.random.split(key)
        params = {
            "actor": init_mlp(k_actor, (obs_dim, *hidden, action_dim), (*hidden_gains, 0.01)),
            "critic": init_mlp(k_critic, (obs_dim, *hidden, 1), (*hidden_gains, 1.0)),
        }
        if isinstance(space, jaxsim.Box):
            params["log_std"] = jnp.full((action_dim,), init_log_std, jnp.float32)
        return params

    return init


def _fold_normalizer(layers: Layers, stats: RunningStats) -> Layers:
    # W @ ((x - mean) / std) + b == (W / std) @ x + (b - (mean / std) @ W): the rollout sees raw
    # observations and still runs a plain MLPPolicy (which a fused kernel can evaluate).
    (w, b), *rest = layers
    std = standard_deviation(stats).reshape(-1)  # observations of any shape enter flattened
    mean = stats.mean.reshape(-1)
    return ((w / std[:, None], b - (mean / std) @ w), *rest)


def to_policy(
    params: dict[str, Any], obs_stats: RunningStats | None = None, deterministic: bool = False
) -> jaxsim.MLPPolicy:
    """The `jaxsim.MLPPolicy` with the actor-critic's weights.

    Args:
      params: what `make_actor_critic(...)(key)` returns (or an update of it).
      obs_stats: if given, observations are normalised by these running statistics, folded into
        the first layers so the policy takes raw observations.
      deterministic: argmax / mean actions instead of samples (evaluation).

    Returns:
      An MLPPolicy whose `evaluate(obs[B, obs_dim], action[B, ...])` gives
      (log_prob[B], entropy[B], value[B]), differentiable with respect to `params`.
    """
    actor, critic = params["actor"], params["critic"]
    if obs_stats is not None:
        actor = _fold_normalizer(actor, obs_stats)
        critic = _fold_normalizer(critic, obs_stats)
    return jaxsim.MLPPolicy(
        actor=actor, critic=critic, log_std=params.get("log_std"), deterministic=deterministic
    )
