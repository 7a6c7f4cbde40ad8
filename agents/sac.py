"""SAC as one jitted training loop on jaxsim: `make_train(config, env) -> train(key)`.

A tanh-squashed Gaussian actor (log-probabilities corrected for the squash), twin critics with
Polyak-averaged target copies, and a learned temperature driving the policy's entropy towards
-action_dim (times `target_entropy_scale`). Critics see actions in [-1, 1] units; the acting
policy maps them to the Box's bounds. Critic, actor and temperature take one Adam step together
on the sum of their losses, each loss reaching only its own parameters (Adam is per parameter,
so this equals three optimisers), with the actor valued by the critics before their step.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import ClassVar

import jax
import jax.numpy as jnp
import optax
from flax import struct

import jaxsim
from agents import losses
from agents.config import config_field, override
from agents.networks import HIDDEN_GAIN, Layers
from agents.offpolicy import OffPolicy, OffPolicyConfig, OffPolicyState, flatten_obs
from agents.structs import Metrics
from agents.sweep import train_fn
from jaxsim.policies import init_mlp, mlp_apply

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0  # as Stable-Baselines3's SAC


@dataclasses.dataclass(frozen=True)
class SACConfig(OffPolicyConfig):
    """Every knob of a SAC run. Defaults are rl-zoo's Pendulum-v1 settings (SB3's SAC defaults,
    learning rate 1e-3, 20k steps), one gradient step per environment step."""

    total_steps: int = override(OffPolicyConfig, "total_steps", 20_000)
    num_envs: int = override(OffPolicyConfig, "num_envs", 1)
    num_steps: int = override(OffPolicyConfig, "num_steps", 8)
    buffer_size: int = override(OffPolicyConfig, "buffer_size", 20_000)
    learning_starts: int = override(
        OffPolicyConfig,
        "learning_starts",
        100,
        "Transitions collected (uniformly random actions) before the first gradient step (SB3's "
        "100; minibatches are drawn with replacement, so they may outnumber the buffer).",
    )
    batch_size: int = override(OffPolicyConfig, "batch_size", 256)
    gradient_steps: int = override(OffPolicyConfig, "gradient_steps", 8)
    tau: float = override(
        OffPolicyConfig,
        "tau",
        0.005,
        "Target critics move this fraction towards the online ones (1: a copy).",
    )
    init_alpha: float = config_field(1.0, "Initial temperature (the entropy bonus's weight).", gt=0)
    learn_alpha: bool = config_field(True, "Learn the temperature (else keep init_alpha).")
    target_entropy_scale: float = config_field(
        1.0, "The learned temperature aims at an entropy of -scale * action_dim."
    )


@struct.dataclass
class SACLossInfo:
    COLUMNS: ClassVar[dict[str, str]] = {
        "critic_loss": "critic_loss",
        "actor_loss": "actor_loss",
        "alpha": "alpha",
        "entropy": "entropy",
    }

    critic_loss: jax.Array
    actor_loss: jax.Array
    alpha: jax.Array
    entropy: jax.Array  # -mean log pi of the actor's samples (in [-1, 1] units)


def _actor_head(actor: Layers, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """obs [..., obs_dim] -> (mean, log_std) [..., action_dim]."""
    mean, log_std = jnp.split(mlp_apply(actor, obs, jax.nn.relu), 2, axis=-1)
    return mean, jnp.clip(log_std, LOG_STD_MIN, LOG_STD_MAX)


def _twin_q(critic: Layers, obs: jax.Array, action: jax.Array) -> jax.Array:
    """Stacked twin critics (leaves [2, ...]) at (obs [B, d], action [B, a]) -> [2, B]."""
    x = jnp.concatenate([obs, action], axis=-1)
    apply = functools.partial(mlp_apply, activation=jax.nn.relu)
    return jax.vmap(apply, (0, None))(critic, x)[..., 0]


@struct.dataclass
class SquashedGaussianPolicy:
    """a = low + (tanh(u) + 1) / 2 * (high - low), u ~ N(mean(obs), std(obs)); with probability
    `uniform` a uniform action instead (1 before learning starts). A jaxsim.rollout policy whose
    `act_from_seed` is elementwise with counter-based draws (jaxsim.rng)."""

    actor: Layers  # flat obs -> [2 * action_dim]: mean, log_std
    low: jax.Array  # [action_dim]
    high: jax.Array  # [action_dim]
    uniform: jax.Array  # float32 scalar in [0, 1]
    obs_shape: tuple[int, ...] = struct.field(pytree_node=False)
    deterministic: bool = struct.field(pytree_node=False, default=False)

    def __call__(self, key: jax.Array, obs: jax.Array) -> jax.Array:
        index = jnp.arange(obs.shape[0], dtype=jnp.uint32)
        return self.act_from_seed(jaxsim.rng.seed_from_key(key), index, obs)

    def act_from_seed(self, seed, index, obs) -> jax.Array:
        rng, stream = jaxsim.rng, jaxsim.rng.POLICY_STREAM
        mean, log_std = _actor_head(self.actor, flatten_obs(obs, self.obs_shape))
        u = mean
        if not self.deterministic:
            # Counters 1-3: RandomPolicy's draws use counter 0 of the same streams.
            streams = stream + 2 * jnp.arange(mean.shape[-1], dtype=jnp.uint32)
            i = index[..., None]
            z = rng.to_normal(rng.bits(seed, i, 2, streams), rng.bits(seed, i, 2, streams + 1))
            u = mean + jnp.exp(log_std) * z
        unit = (jnp.tanh(u) + 1.0) / 2.0
        if not self.deterministic:
            coin = rng.uniform(seed, index, 1, stream)
            unit = jnp.where(
                (coin < self.uniform)[..., None], rng.uniform(seed, i, 3, streams), unit
            )
        return self.low + unit * (self.high - self.low)


class SAC(OffPolicy):
    """SAC on one jaxsim environment with a Box action space of rank 1."""

    name = "sac"
    config_type = SACConfig
    TARGET = "critic"
    LossInfo = SACLossInfo

    def setup(self) -> None:
        super().setup()
        space = self.action_space
        if not isinstance(space, jaxsim.Box) or len(space.shape) != 1:
            raise ValueError(
                f"SAC: {self.env.id} has action space {space}; SAC needs a Box action space of "
                "rank 1 (use dqn for Discrete actions)"
            )
        c = self.config
        self.action_dim = space.shape[0]
        self.low = jnp.broadcast_to(jnp.asarray(space.low, jnp.float32), space.shape)
        self.high = jnp.broadcast_to(jnp.asarray(space.high, jnp.float32), space.shape)
        self.target_entropy = -c.target_entropy_scale * self.action_dim
        hidden, gains = c.hidden, (HIDDEN_GAIN,) * len(c.hidden)
        actor_sizes = (self.obs_dim, *hidden, 2 * self.action_dim)
        critic_sizes = (self.obs_dim + self.action_dim, *hidden, 1)

        def init(key):
            k_actor, k_critic = jax.random.split(key)
            twin = jax.vmap(lambda k: init_mlp(k, critic_sizes, (*gains, 1.0)))
            return {
                "actor": init_mlp(k_actor, actor_sizes, (*gains, 0.01)),
                "critic": twin(jax.random.split(k_critic, 2)),
                "log_alpha": jnp.log(jnp.float32(c.init_alpha)),
            }

        self.init_params = init
        self.optimizer = optax.adam(c.learning_rate)

    def policy(self, runner: OffPolicyState, deterministic: bool = False):
        """Samples of the squashed Gaussian (uniform ones before learning starts); its tanh(mean)
        if deterministic."""
        started = self.steps_done(runner) >= self.config.learning_starts
        uniform = jnp.where(started, 0.0, 1.0).astype(jnp.float32)
        return SquashedGaussianPolicy(
            runner.params["actor"], self.low, self.high, uniform, self.obs_shape, deterministic
        )

    def _sample(self, actor: Layers, obs: jax.Array, key: jax.Array):
        """Reparameterised actions in [-1, 1] units [B, a] and their log-probabilities [B]."""
        mean, log_std = _actor_head(actor, obs)
        u = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape)
        return jnp.tanh(u), losses.squashed_gaussian_log_prob(mean, log_std, u)

    def loss(self, params, target, batch, key):
        c = self.config
        k_next, k_now = jax.random.split(key)
        obs = flatten_obs(batch.obs, self.obs_shape)
        next_obs = flatten_obs(batch.next_obs, self.obs_shape)
        action = 2.0 * (batch.action - self.low) / (self.high - self.low) - 1.0
        alpha = jax.lax.stop_gradient(jnp.exp(params["log_alpha"]))
        if not c.learn_alpha:
            alpha = jnp.float32(c.init_alpha)

        next_action, next_log_prob = self._sample(params["actor"], next_obs, k_next)
        next_q1, next_q2 = _twin_q(target, next_obs, next_action)
        y = losses.sac_target(
            batch.reward, batch.terminated, next_q1, next_q2, next_log_prob, alpha, c.gamma
        )
        q = _twin_q(params["critic"], obs, action)
        critic_loss = 0.5 * jnp.sum(jnp.mean((q - y) ** 2, axis=-1))

        new_action, log_prob = self._sample(params["actor"], obs, k_now)
        q_new = _twin_q(jax.lax.stop_gradient(params["critic"]), obs, new_action)
        actor_loss = losses.sac_actor_loss(log_prob, jnp.min(q_new, axis=0), alpha)
        total = critic_loss + actor_loss
        if c.learn_alpha:
            total += losses.temperature_loss(params["log_alpha"], log_prob, self.target_entropy)
        return total, SACLossInfo(critic_loss, actor_loss, alpha, -log_prob.mean())


def make_train(
    config: SACConfig,
    env: jaxsim.Env,
    progress: Callable[[Metrics], None] | None = None,
    *,
    env_params=None,
    params_sampler=None,
    sweep=None,
) -> Callable[[jax.Array], tuple[OffPolicyState, Metrics]]:
    """train(key) -> (final OffPolicyState, Metrics[num_updates]); jit it, or jit(vmap(train)).

    The training rollouts run on `env_params` (leaves shared or [num_envs, ...]) and draw
    `params_sampler`'s fields every episode (see `agents.agent.Agent`). `sweep`: every
    configuration of a grid of float hyperparameters in one program (`agents.sweep`)."""
    agent = SAC(config, env, env_params, progress, params_sampler=params_sampler)
    return train_fn(agent, sweep)
