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
from flax import struct

import jaxsim
from agents.normalizers import RunningStats, standard_deviation
from jaxsim.policies import init_mlp, mlp_apply

Layers = tuple[tuple[jax.Array, jax.Array], ...]
"""An MLP's weights: ((kernel[in, out], bias[out]), ...), first layer first."""

HIDDEN_GAIN = math.sqrt(2.0)
"""Orthogonal-init gain of tanh hidden layers (as `jaxsim.init_mlp_policy`)."""


NETWORKS = ("mlp", "cnn")
"""PPO's actor-critic kinds: separate tanh MLPs on the flattened observation, or a conv torso
shared by the actor and critic heads (`CNNPolicy`, image observations [H, W, C])."""


def make_actor_critic(
    env: jaxsim.Env,
    env_params=None,
    hidden: Sequence[int] = (64, 64),
    init_log_std: float = 0.0,
    network: str = "mlp",
    conv_channels: int = 16,
) -> Callable[[jax.Array], dict[str, Any]]:
    """`init(key) -> params` of PPO's actor-critic for `env`; a ValueError if it can't serve it.

    `network="cnn"` builds `cnn_init`'s conv net instead (Discrete actions, [H, W, C]
    observations); what follows describes the MLP.

    Separate tanh MLPs for actor and critic, initialised as `jaxsim.init_mlp_policy` (gains
    sqrt 2 hidden, 0.01 actor head, 1 critic head; the same key gives the same weights).
    Discrete action spaces get a categorical over the actor's logits; Box spaces a diagonal
    Gaussian around the actor's output with a state-independent `log_std`, not squashed (the
    environment clips actions to its bounds, so log-probabilities stay exact).

    `params` is `{"actor": Layers, "critic": Layers}`, plus `"log_std": [action_dim]` for Box.
    """
    env_params = env.default_params if env_params is None else env_params
    obs_space, space = env.observation_space(env_params), env.action_space(env_params)
    return actor_critic_init(
        obs_space, space, hidden, init_log_std, env.id, network=network, conv_channels=conv_channels
    )


def actor_critic_init(
    obs_space,
    space,
    hidden: Sequence[int],
    init_log_std: float,
    env_name: str,
    network: str = "mlp",
    conv_channels: int = 16,
) -> Callable[[jax.Array], dict[str, Any]]:
    """`make_actor_critic` from the spaces alone (`env_name` is for errors): what a learner of
    an environment outside JAX (`agents.decoupled`) builds its networks with."""
    if network not in NETWORKS:
        raise ValueError(f"PPO: network must be one of {NETWORKS}, got {network!r}")
    if network == "cnn":
        return cnn_init(obs_space, space, hidden, conv_channels, env_name)
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


CONV_SIZE = 3
"""The conv torso's kernel: 3x3, stride 1, no padding, as MinAtar's network (Young & Tian 2019)."""


def cnn_init(
    obs_space, space, hidden: Sequence[int], channels: int, env_name: str
) -> Callable[[jax.Array], dict[str, Any]]:
    """`init(key) -> params` of a conv actor-critic: MinAtar's network (Young & Tian 2019).

    One 3x3 conv of `channels` (stride 1, no padding) and ReLU, flattened, then ReLU dense
    layers of `hidden` widths: a torso shared by a linear actor head (logits) and a linear
    critic head (value). Orthogonal init, gains sqrt 2 in the torso, 0.01 actor head, 1
    critic head. A ValueError unless observations are [H, W, C] (H, W >= 3) and actions
    Discrete.

    `params` is `{"conv": (kernel[3, 3, C, channels], bias), "torso": Layers, "actor": Layers,
    "critic": Layers}`; `to_policy` makes it a `CNNPolicy`.
    """
    shape = getattr(obs_space, "shape", ())
    if not isinstance(obs_space, jaxsim.Box) or len(shape) != 3 or min(shape[:2]) < CONV_SIZE:
        raise ValueError(
            f"PPO: network='cnn' needs image observations [H, W, C] with H, W >= {CONV_SIZE}; "
            f"{env_name} has observation space {obs_space}"
        )
    if not isinstance(space, jaxsim.Discrete):
        raise ValueError(
            f"PPO: network='cnn' serves Discrete action spaces; {env_name} has {space}"
        )
    height, width, in_channels = shape
    conv_out = (height - CONV_SIZE + 1) * (width - CONV_SIZE + 1) * channels
    sizes, hidden = (conv_out, *hidden), tuple(hidden)

    def init(key: jax.Array) -> dict[str, Any]:
        k_conv, k_torso, k_actor, k_critic = jax.random.split(key, 4)
        patch = CONV_SIZE * CONV_SIZE * in_channels
        ((kernel, bias),) = init_mlp(k_conv, (patch, channels), (HIDDEN_GAIN,))
        kernel = kernel.reshape(CONV_SIZE, CONV_SIZE, in_channels, channels)
        return {
            "conv": (kernel, bias),
            "torso": init_mlp(k_torso, sizes, (HIDDEN_GAIN,) * len(hidden)),
            "actor": init_mlp(k_actor, (sizes[-1], space.n), (0.01,)),
            "critic": init_mlp(k_critic, (sizes[-1], 1), (1.0,)),
        }

    return init


def cnn_features(conv, torso: Layers, obs: jax.Array) -> jax.Array:
    """obs[*B, H, W, C] (any dtype: bool grids are cast) -> features[*B, hidden[-1]].

    The conv is 9 shifted slices of the grid against the kernel's taps, summed (stride 1, no
    padding): plain products that XLA on the CPU runs as well as its convolution, and that
    a reference `jax.lax.conv_general_dilated` checks in the tests.
    """
    kernel, bias = conv
    x = obs.astype(jnp.float32)
    batch, (height, width) = x.shape[:-3], x.shape[-3:-1]
    out_h, out_w = height - CONV_SIZE + 1, width - CONV_SIZE + 1
    patches = jnp.concatenate(
        [
            x[..., i : i + out_h, j : j + out_w, :]
            for i in range(CONV_SIZE)
            for j in range(CONV_SIZE)
        ],
        axis=-1,
    )  # [*B, out_h, out_w, 9 * C], taps in the kernel's (i, j, c) order
    w = kernel.reshape(-1, kernel.shape[-1])
    h = jnp.matmul(patches, w, precision=jax.lax.Precision.HIGHEST) + bias
    h = jax.nn.relu(h).reshape(*batch, -1)
    return jax.nn.relu(mlp_apply(torso, h, activation=jax.nn.relu))


@struct.dataclass
class CNNPolicy:
    """`cnn_init`'s actor-critic as a `jaxsim.rollout` policy (scan backend).

    The torso's features go to a `jaxsim.MLPPolicy` of the two linear heads, so sampling
    (counter-based, as the MLP's), log-probabilities and entropy are that policy's.
    """

    conv: tuple  # (kernel[3, 3, C, channels], bias[channels])
    torso: tuple  # Layers after the conv, ReLU after each
    actor: tuple  # Layers: logits
    critic: tuple  # Layers: value[1]
    deterministic: bool = struct.field(pytree_node=False, default=False)

    def _heads(self) -> jaxsim.MLPPolicy:
        return jaxsim.MLPPolicy(
            actor=self.actor, critic=self.critic, deterministic=self.deterministic
        )

    def __call__(self, key: jax.Array, obs: jax.Array):
        return self._heads()(key, cnn_features(self.conv, self.torso, obs))

    def act_from_seed(self, seed, index, obs):
        """obs[B, H, W, C], index[B] -> (action[B], {"log_prob", "value"} of [B])."""
        return self._heads().act_from_seed(seed, index, cnn_features(self.conv, self.torso, obs))

    def evaluate(self, obs, action):
        """(log_prob[*B], entropy[*B], value[*B]) of `action[*B]` at `obs[*B, H, W, C]`."""
        return self._heads().evaluate(cnn_features(self.conv, self.torso, obs), action)


def _fold_normalizer(layers: Layers, stats: RunningStats) -> Layers:
    # W @ ((x - mean) / std) + b == (W / std) @ x + (b - (mean / std) @ W): the rollout sees raw
    # observations and still runs a plain MLPPolicy (which a fused kernel can evaluate).
    (w, b), *rest = layers
    std = standard_deviation(stats).reshape(-1)  # observations of any shape enter flattened
    mean = stats.mean.reshape(-1)
    return ((w / std[:, None], b - (mean / std) @ w), *rest)


def to_policy(
    params: dict[str, Any], obs_stats: RunningStats | None = None, deterministic: bool = False
) -> jaxsim.MLPPolicy | CNNPolicy:
    """The `jaxsim.MLPPolicy` with the actor-critic's weights (a `CNNPolicy` for `cnn_init`'s).

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
    if "conv" in params:
        if obs_stats is not None:
            raise ValueError("to_policy: the conv actor-critic takes no observation normaliser")
        return CNNPolicy(params["conv"], params["torso"], actor, critic, deterministic)
    if obs_stats is not None:
        actor = _fold_normalizer(actor, obs_stats)
        critic = _fold_normalizer(critic, obs_stats)
    return jaxsim.MLPPolicy(
        actor=actor, critic=critic, log_std=params.get("log_std"), deterministic=deterministic
    )
