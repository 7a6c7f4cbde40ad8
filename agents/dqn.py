"""DQN as one jitted training loop on jaxsim: `make_train(config, env) -> train(key)`.

Double DQN (the online network picks the next action, the target network values it), a Huber
loss, a target network updated every `target_update_every` gradient steps (a copy at `tau=1`,
Polyak averaging below), and an epsilon-greedy acting policy whose epsilon falls linearly over
the first `exploration_fraction` of the run. The update is `agents.offpolicy.OffPolicy`'s.
"""

from __future__ import annotations

import dataclasses
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


@dataclasses.dataclass(frozen=True)
class DQNConfig(OffPolicyConfig):
    """Every knob of a DQN run. Defaults are rl-zoo's CartPole-v1 settings (4 envs x 64 steps
    for SB3's train_freq 256; its target copy every 10 env steps lands between rounds of
    gradient steps, which is target_update_every = gradient_steps here). They failed one seed
    in three on CartPole here; its preset (agents/presets.py) is cleanrl's."""

    learning_rate: float = override(OffPolicyConfig, "learning_rate", 2.3e-3)
    target_update_every: int = override(OffPolicyConfig, "target_update_every", 128)
    start_e: float = config_field(
        1.0, "Epsilon (random-action probability) at the start.", ge=0, le=1
    )
    end_e: float = config_field(0.04, "Epsilon after the exploration phase.", ge=0, le=1)
    exploration_fraction: float = config_field(
        0.16,
        "Fraction of total_steps over which epsilon falls linearly from start_e to end_e.",
        gt=0,
        le=1,
    )
    max_grad_norm: float = config_field(10.0, "Global gradient-norm clipping threshold.", gt=0)
    anneal_lr: bool = config_field(
        False, "Decay the learning rate linearly to 0 over the run's gradient steps."
    )
    huber_delta: float = config_field(
        1.0,
        "TD errors up to this get the squared loss, larger ones a linear one (Huber; SB3: 1). "
        "Above any TD error the task can produce it is the squared error (cleanrl's loss).",
        gt=0,
    )


@struct.dataclass
class DQNLossInfo:
    COLUMNS: ClassVar[dict[str, str]] = {
        "q_loss": "q_loss",
        "q_value": "q_value",
        "epsilon": "epsilon",
    }

    q_loss: jax.Array
    q_value: jax.Array  # mean Q of the actions taken, over the minibatch
    epsilon: jax.Array


@struct.dataclass
class EpsilonGreedyPolicy:
    """argmax_a Q(obs, a), or a uniform action with probability `epsilon`; a jaxsim.rollout policy.

    `act_from_seed` is elementwise over the batch and draws counter-based numbers (jaxsim.rng),
    the form jaxsim's fused kernel evaluates.
    """

    q: Layers  # flat obs -> [num_actions], ReLU
    epsilon: jax.Array  # float32 scalar
    num_actions: int = struct.field(pytree_node=False)
    obs_shape: tuple[int, ...] = struct.field(pytree_node=False)

    def __call__(self, key: jax.Array, obs: jax.Array) -> jax.Array:
        index = jnp.arange(obs.shape[0], dtype=jnp.uint32)
        return self.act_from_seed(jaxsim.rng.seed_from_key(key), index, obs)

    def act_from_seed(self, seed, index, obs) -> jax.Array:
        q = mlp_apply(self.q, flatten_obs(obs, self.obs_shape), jax.nn.relu)
        greedy = jnp.argmax(q, axis=-1).astype(jnp.int32)
        # Counter 1 and 2: RandomPolicy's draws use counter 0 of the same stream.
        coin = jaxsim.rng.uniform(seed, index, 1, jaxsim.rng.POLICY_STREAM)
        uniform = jaxsim.rng.randint(seed, index, 2, jaxsim.rng.POLICY_STREAM, self.num_actions)
        return jnp.where(coin < self.epsilon, uniform.astype(jnp.int32), greedy)


class DQN(OffPolicy):
    """DQN on one jaxsim environment with Discrete actions (see `agents.offpolicy.OffPolicy`)."""

    name = "dqn"
    config_type = DQNConfig
    TARGET = "q"
    LossInfo = DQNLossInfo

    def setup(self) -> None:
        super().setup()
        space = self.action_space
        if not isinstance(space, jaxsim.Discrete):
            raise ValueError(
                f"DQN: {self.env.id} has action space {space}; DQN needs a Discrete action "
                "space (use sac for Box actions)"
            )
        c = self.config
        self.num_actions = int(space.n)
        sizes = (self.obs_dim, *c.hidden, self.num_actions)
        gains = (HIDDEN_GAIN,) * len(c.hidden) + (1.0,)
        self.init_params = lambda key: {"q": init_mlp(key, sizes, gains)}
        learning_rate = c.learning_rate
        if c.anneal_lr:
            # The optimizer counts only the gradient steps taken, from learning_starts on.
            learning_rate = optax.linear_schedule(c.learning_rate, 0.0, c.total_gradient_steps)
        self.optimizer = optax.chain(
            optax.clip_by_global_norm(c.max_grad_norm), optax.adam(learning_rate)
        )

    def epsilon(self, runner: OffPolicyState) -> jax.Array:
        c = self.config
        progress = self.steps_done(runner) / (c.exploration_fraction * c.total_steps)
        return c.start_e + (c.end_e - c.start_e) * jnp.minimum(progress, 1.0)

    def policy(self, runner: OffPolicyState, deterministic: bool = False) -> EpsilonGreedyPolicy:
        """Epsilon-greedy on the online Q-network; greedy (epsilon 0) if deterministic."""
        epsilon = jnp.float32(0.0) if deterministic else self.epsilon(runner)
        return EpsilonGreedyPolicy(runner.params["q"], epsilon, self.num_actions, self.obs_shape)

    def loss(self, params, target, batch, key):
        del key
        obs = flatten_obs(batch.obs, self.obs_shape)
        next_obs = flatten_obs(batch.next_obs, self.obs_shape)
        q_all = mlp_apply(params["q"], obs, jax.nn.relu)
        q = jnp.take_along_axis(q_all, batch.action[:, None].astype(jnp.int32), axis=-1)[:, 0]
        y = losses.double_q_target(
            batch.reward,
            batch.terminated,
            mlp_apply(params["q"], next_obs, jax.nn.relu),
            mlp_apply(target, next_obs, jax.nn.relu),
            self.config.gamma,
        )
        q_loss = optax.huber_loss(q, y, delta=self.config.huber_delta).mean()
        return q_loss, DQNLossInfo(q_loss, q.mean(), jnp.float32(0.0))

    def update(self, runner: OffPolicyState):
        runner2, metrics = super().update(runner)
        # The epsilon the rollout acted with, not a mean over gradient steps.
        loss = metrics.loss.replace(epsilon=self.epsilon(runner))
        return runner2, metrics.replace(loss=loss)


def make_train(
    config: DQNConfig,
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
    agent = DQN(config, env, env_params, progress, params_sampler=params_sampler)
    return train_fn(agent, sweep)
