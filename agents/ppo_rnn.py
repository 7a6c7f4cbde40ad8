"""Recurrent PPO (a GRU actor-critic) on jaxsim: `make_train(config, env) -> train(key)`.

For partially observed tasks (CartPole-NoVel-v1: positions only). The policy is a stateful
`jaxsim.rollout` policy (`RecurrentPolicy`: `init_carry`, `policy(key, obs, carry)`): the
rollout threads each environment's GRU state through the steps and resets it where an episode
ends, and records the state each rollout started from (`Trajectory.policy_carry`). Learning is
on whole sequences: minibatches are sets of environments, and the loss re-runs the GRU over each
environment's `num_steps` steps from that recorded state, resetting it where an episode began,
so the re-run sees the states the acting policy saw (as PureJaxRL's PPO-RNN trains).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

import jaxsim
from agents import losses
from agents.agent import Agent, latest_return
from agents.config import config_field
from agents.normalizers import observation_normalizer, reward_scaler
from agents.ppo import PPOConfig, ppo_optimizer
from agents.structs import LossInfo, Metrics, RunnerState, TrainState
from agents.sweep import train_fn
from jaxsim.policies import orthogonal_init


@dataclasses.dataclass(frozen=True)
class PPORNNConfig(PPOConfig):
    """Every knob of a recurrent PPO run: PPO's (`PPOConfig`), with these differences.

    `num_minibatches` splits the environments (whole sequences of `num_steps` steps), so it
    must divide `num_envs`; `hidden` is (embedding width, actor/critic head widths...);
    observations are not normalised (`normalize_obs` is refused) and the rollout runs on the
    scan backend (a stateful policy: `rollout_backend` "auto" or "scan").
    """

    gru_size: int = config_field(128, "Width of the GRU's hidden state.", ge=1)

    def validate(self) -> None:
        super(PPOConfig, self).validate()  # AgentConfig's checks; the batch split is ours
        if self.num_envs % self.num_minibatches:
            self.fail(
                f"num_minibatches={self.num_minibatches} must divide num_envs={self.num_envs}: "
                "a recurrent minibatch is a set of whole environment sequences"
            )
        if self.network != "mlp":
            self.fail(f"network={self.network!r}: the recurrent actor-critic has its own network")
        if self.normalize_obs:
            self.fail("normalize_obs is not supported by the recurrent actor-critic")
        if self.rollout_backend == "fused":
            self.fail(
                "rollout_backend='fused' cannot run a recurrent (stateful) policy; use 'auto' "
                "or 'scan'"
            )


# ------------------------------------------------------------------------------------ network
class RecurrentActorCritic(nn.Module):
    """One step of the GRU actor-critic: (carry[*B, gru], obs[*B, *obs_shape]) ->
    (carry, logits[*B, num_actions], value[*B]).

    A ReLU embedding of `hidden[0]`, a `nn.GRUCell`, then separate tanh MLP heads of
    `hidden[1:]` for actor and critic (orthogonal init: gains sqrt 2, 0.01 actor head, 1 critic
    head; the GRU's recurrent kernel orthogonal too). Any leading batch shape: the learner
    applies it to [T, B] at once. Orthogonal kernels come from `jaxsim.policies.orthogonal_init`,
    not flax's `orthogonal`, whose LAPACK QR under a vmapped init can hang the CPU process.
    """

    num_actions: int
    hidden: tuple[int, ...]
    gru_size: int

    @nn.compact
    def __call__(self, carry, obs):
        obs = obs.reshape(*obs.shape[: carry.ndim - 1], -1).astype(jnp.float32)

        def dense(width, scale):
            return nn.Dense(
                width, kernel_init=orthogonal_init(scale), bias_init=nn.initializers.zeros
            )

        x = nn.relu(dense(self.hidden[0], math.sqrt(2.0))(obs))
        carry, x = nn.GRUCell(self.gru_size, recurrent_kernel_init=orthogonal_init(1.0))(carry, x)
        actor, critic = x, x
        for width in self.hidden[1:]:
            actor = nn.tanh(dense(width, math.sqrt(2.0))(actor))
            critic = nn.tanh(dense(width, math.sqrt(2.0))(critic))
        logits = dense(self.num_actions, 0.01)(actor)
        value = dense(1, 1.0)(critic)[..., 0]
        return carry, logits, value


@struct.dataclass
class RecurrentPolicy:
    """The GRU actor-critic as a stateful `jaxsim.rollout` policy (scan backend).

    `policy(key, obs[B, ...], carry[B, gru]) -> (action[B], {"log_prob", "value"}, carry)`.
    Called without a carry it acts from a fresh one and returns (action, extras), as a
    stateless policy (what a memory estimate traces).
    """

    params: Any
    num_actions: int = struct.field(pytree_node=False)
    hidden: tuple[int, ...] = struct.field(pytree_node=False)
    gru_size: int = struct.field(pytree_node=False)
    deterministic: bool = struct.field(pytree_node=False, default=False)

    @property
    def network(self) -> RecurrentActorCritic:
        return RecurrentActorCritic(self.num_actions, self.hidden, self.gru_size)

    def init_carry(self, num_envs: int) -> jax.Array:
        """The GRU state at an episode's start: zeros[num_envs, gru_size]."""
        return jnp.zeros((num_envs, self.gru_size), jnp.float32)

    def __call__(self, key, obs, carry=None):
        stateless = carry is None
        if stateless:
            carry = self.init_carry(obs.shape[0])
        carry, logits, value = self.network.apply(self.params, carry, obs)
        if self.deterministic:
            action = jnp.argmax(logits, axis=-1).astype(jnp.int32)
        else:
            action = jax.random.categorical(key, logits).astype(jnp.int32)
        log_prob = _log_prob(logits, action)
        extras = {"log_prob": log_prob, "value": value}
        return (action, extras) if stateless else (action, extras, carry)


def _log_prob(logits, action):
    log_p = jax.nn.log_softmax(logits)
    return jnp.take_along_axis(log_p, action[..., None], axis=-1)[..., 0]


def _entropy(logits):
    log_p = jax.nn.log_softmax(logits)
    return -(jnp.exp(log_p) * log_p).sum(-1)


# ------------------------------------------------------------------------------------ learning
@struct.dataclass
class SequenceBatch:
    """One update's sequences: [T, B, ...] per step, `carry` [B, gru] before step 0."""

    obs: jax.Array
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    advantage: jax.Array
    target: jax.Array
    reset: jax.Array  # bool [T, B]: the GRU state is fresh before step t (an episode began)
    carry: jax.Array

    def environments(self, index: jax.Array) -> SequenceBatch:
        """The sequences of environments `index[b]`."""
        per_step = {
            f.name: getattr(self, f.name)[:, index]
            for f in dataclasses.fields(self)
            if f.name != "carry"
        }
        return SequenceBatch(**per_step, carry=self.carry[index])


def episode_starts(done: jax.Array) -> jax.Array:
    """done[T, B] -> bool[T, B]: step t begins an episode after step t - 1 ended one. Step 0's
    carry is the rollout's recorded one, already fresh where an episode began there."""
    return jnp.concatenate([jnp.zeros_like(done[:1]), done[:-1]], axis=0)


def run_sequence(network: RecurrentActorCritic, params, carry, obs, reset):
    """The GRU re-run over sequences: carry[B, gru], obs[T, B, ...], reset[T, B] ->
    (carry after each step [T, B, gru], logits [T, B, A], value [T, B]); the carry is zeroed
    (`init_carry`'s value) before every step where `reset`."""

    def step(carry, x):
        obs_t, reset_t = x
        carry = jnp.where(reset_t[:, None], 0.0, carry)
        carry, logits, value = network.apply(params, carry, obs_t)
        return carry, (carry, logits, value)

    _, out = jax.lax.scan(step, carry, (obs, reset))
    return out


class PPORNN(Agent):
    """Recurrent PPO on one jaxsim environment with Discrete actions (`agents.agent.Agent`)."""

    name = "ppo_rnn"
    config_type = PPORNNConfig

    def setup(self) -> None:
        c, env = self.config, self.env
        space = self.action_space
        if not isinstance(space, jaxsim.Discrete):
            raise ValueError(
                f"PPORNN: {env.id} has action space {space}; the recurrent actor-critic serves "
                "Discrete action spaces"
            )
        if not isinstance(env.observation_space(env.default_params), jaxsim.Box):
            raise ValueError(f"PPORNN: {env.id}'s observation space must be a Box")
        self.network = RecurrentActorCritic(space.n, tuple(c.hidden), c.gru_size)
        self.obs_norm = observation_normalizer(self.obs_shape)  # unused: RunnerState's fields
        self.reward_scaler = reward_scaler(c.num_envs, c.gamma)
        self.optimizer = ppo_optimizer(c)

    def _policy(self, params, deterministic: bool = False) -> RecurrentPolicy:
        c = self.config
        return RecurrentPolicy(
            params, self.action_space.n, tuple(c.hidden), c.gru_size, deterministic
        )

    # ------------------------------------------------------------------------------------ state
    def init(self, key: jax.Array) -> RunnerState:
        k_net, k_env, k_run = jax.random.split(key, 3)
        c = self.config
        carry = jnp.zeros((1, c.gru_size), jnp.float32)
        obs = jnp.zeros((1, *self.obs_shape), jnp.float32)
        params = self.network.init(k_net, carry, obs)
        # The runner's structure is the same before and after an update: the carry is there.
        env_state = self.initial_state(k_env)
        env_state = env_state.replace(policy_carry=self._policy(params).init_carry(c.num_envs))
        return RunnerState.start(
            params, self.optimizer, self.obs_norm, self.reward_scaler, env_state, k_run
        )

    def policy(self, runner: RunnerState, deterministic: bool = False) -> RecurrentPolicy:
        """The runner's policy over raw observations: a stateful `RecurrentPolicy`."""
        return self._policy(runner.params, deterministic)

    # ----------------------------------------------------------------------------------- update
    def update(self, runner: RunnerState) -> tuple[RunnerState, Metrics]:
        """One update: a rollout of num_envs x num_steps, GAE, epochs of sequence minibatches."""
        c = self.config
        key, k_rollout, k_epochs = jax.random.split(runner.key, 3)
        with jax.named_scope("rollout"):
            traj = self.rollout(self.policy(runner), k_rollout, runner.env_state)
        reward_state = runner.reward_state
        with jax.named_scope("gae"):
            reward = traj.reward
            done = traj.terminated | traj.truncated
            if c.scale_rewards:
                reward_state, reward = self.reward_scaler.update(reward_state, reward, done)
            reset = episode_starts(done)
            # The critic at next_obs[t] needs the GRU state after step t (before any reset).
            carries, _, _ = run_sequence(
                self.network, runner.params, traj.policy_carry, traj.obs, reset
            )
            _, _, next_value = self.network.apply(runner.params, carries, traj.next_obs)
            value = traj.extras["value"]
            advantage, target = losses.gae(
                reward, value, next_value, traj.terminated, traj.truncated, c.gamma, c.gae_lambda
            )
        batch = SequenceBatch(
            obs=traj.obs,
            action=traj.action,
            log_prob=traj.extras["log_prob"],
            value=value,
            advantage=advantage,
            target=target,
            reset=reset,
            carry=traj.policy_carry,
        )
        train = TrainState(runner.params, runner.opt_state)
        epoch = functools.partial(self._epoch, batch)
        train, info = jax.lax.scan(epoch, train, jax.random.split(k_epochs, c.update_epochs))
        info = jax.tree.map(jnp.mean, info)
        last_return, episodes = latest_return(traj, runner.last_return)
        runner = runner.replace(
            params=train.params,
            opt_state=train.opt_state,
            reward_state=reward_state,
            env_state=traj.final_state,
            key=key,
            update=runner.update + 1,
            last_return=last_return,
        )
        return runner, self.metrics(runner.update, last_return, episodes, info)

    def _epoch(self, batch: SequenceBatch, train: TrainState, key: jax.Array):
        c = self.config
        with jax.named_scope("shuffle"):
            envs = jax.random.permutation(key, c.num_envs)
            envs = envs.reshape(c.num_minibatches, c.num_envs // c.num_minibatches)
        return jax.lax.scan(
            lambda train, index: self._minibatch(train, batch.environments(index)), train, envs
        )

    def _minibatch(self, train: TrainState, mb: SequenceBatch):
        params, opt_state, info = losses.gradient_step(
            functools.partial(self._loss, mb=mb), self.optimizer, train.params, train.opt_state
        )
        return TrainState(params, opt_state), info

    def _loss(self, params, mb: SequenceBatch):
        c = self.config
        _, logits, value = run_sequence(self.network, params, mb.carry, mb.obs, mb.reset)
        log_prob, entropy = _log_prob(logits, mb.action).reshape(-1), _entropy(logits).reshape(-1)
        value = value.reshape(-1)
        advantage = mb.advantage.reshape(-1)
        if c.normalize_advantages:
            advantage = losses.normalize_advantage(advantage)
        policy_loss, approx_kl, clip_fraction = losses.clipped_policy_loss(
            log_prob, mb.log_prob.reshape(-1), advantage, c.clip_eps
        )
        v_loss = losses.value_loss(
            value,
            mb.value.reshape(-1),
            mb.target.reshape(-1),
            c.clip_eps if c.clip_value else None,
        )
        entropy = losses.entropy_bonus(entropy)
        total = policy_loss + c.vf_coef * v_loss - c.ent_coef * entropy
        return total, LossInfo(total, policy_loss, v_loss, entropy, approx_kl, clip_fraction)


def make_train(
    config: PPORNNConfig,
    env: jaxsim.Env,
    progress: Callable[[Metrics], None] | None = None,
    *,
    env_params=None,
    params_sampler=None,
) -> Callable[[jax.Array], tuple[RunnerState, Metrics]]:
    """train(key) -> (final RunnerState, Metrics[num_updates]); jit it, or jit(vmap(train))."""
    agent = PPORNN(config, env, env_params, progress, params_sampler=params_sampler)
    return train_fn(agent)
