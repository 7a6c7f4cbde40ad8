"""What DQN and SAC share: the config fields of a replay-based agent, its runner state, and the
update (a rollout into the replay buffer, then gradient steps on sampled minibatches and target
network updates), as an `Agent` subclass each algorithm completes with its networks and loss.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
from flax import struct

import jaxsim
from agents import losses, replay
from agents.agent import Agent, latest_return
from agents.config import AgentConfig, config_field, override
from jaxsim.policies import flat_obs


@dataclasses.dataclass(frozen=True)
class OffPolicyConfig(AgentConfig):
    """The fields every replay-based agent has. Subclasses redeclare defaults and add their own."""

    num_steps: int = override(
        AgentConfig,
        "num_steps",
        64,
        "Steps per environment in each rollout (between rounds of gradient steps).",
    )
    hidden: tuple[int, ...] = override(
        AgentConfig, "hidden", (256, 256), "Hidden layer widths (ReLU) of every net."
    )
    rollout_backend: str = override(
        AgentConfig,
        "rollout_backend",
        "scan",
        '`jaxsim.rollout` backend ("auto" takes "scan" for these policies; "fused" if asked).',
    )
    buffer_size: int = config_field(
        100_000, "Replay buffer capacity in transitions, per seed.", ge=1
    )
    learning_starts: int = config_field(
        1_000, "Transitions collected before the first gradient step.", ge=0
    )
    batch_size: int = config_field(64, "Transitions per minibatch sampled from the buffer.", ge=1)
    gradient_steps: int = config_field(128, "Gradient steps after each rollout.", ge=1)
    tau: float = config_field(
        1.0, "Target networks move this fraction towards the online ones (1: a copy).", gt=0, le=1
    )
    target_update_every: int = config_field(
        1, "Gradient steps between target network updates.", ge=1
    )

    @property
    def first_learning_update(self) -> int:
        """The update (1-based) whose rollout brings the buffer to learning_starts transitions."""
        return max(1, math.ceil(self.learning_starts / self.steps_per_update))

    @property
    def total_gradient_steps(self) -> int:
        """Gradient steps over the run: gradient_steps per update from the first learning one."""
        return max(0, self.num_updates - self.first_learning_update + 1) * self.gradient_steps

    def validate(self) -> None:
        super().validate()
        if self.learning_starts >= self.total_steps:
            self.fail(
                f"learning_starts={self.learning_starts} must be in [0, total_steps="
                f"{self.total_steps}): the run would never take a gradient step"
            )
        if self.learning_starts > self.buffer_size:
            self.fail(
                f"learning_starts={self.learning_starts} exceeds buffer_size={self.buffer_size}: "
                "the buffer would never hold enough transitions to start learning"
            )
        if self.buffer_size < self.steps_per_update:
            self.fail(
                f"buffer_size={self.buffer_size} is smaller than one rollout batch (num_envs * "
                f"num_steps = {self.steps_per_update}): a rollout would overwrite itself"
            )
        # No check of batch_size against the buffer: minibatches are drawn with replacement
        # (replay.sample), as SB3 does, so learning may start before a batch's worth is held
        # (SB3's SAC: learning_starts 100, batch 256).


@struct.dataclass
class OffPolicyState:
    """Everything a DQN or SAC run carries between updates (a seed axis under vmap)."""

    params: dict[str, Any]  # the online networks
    target: Any  # the target networks (params[agent.TARGET]'s structure)
    opt_state: Any
    buffer: replay.ReplayBuffer
    env_state: jaxsim.RolloutState
    key: jax.Array
    update: jax.Array  # int32: updates done
    grad_steps: jax.Array  # int32: gradient steps done (paces the target updates)
    last_return: jax.Array  # float32: mean return of the latest finished episodes (NaN: none yet)


@struct.dataclass
class Learner:
    """The part of OffPolicyState that gradient steps change."""

    params: dict[str, Any]
    target: Any
    opt_state: Any
    grad_steps: jax.Array


def flatten_obs(obs: jax.Array, obs_shape: tuple[int, ...]) -> jax.Array:
    """[..., *obs_shape] -> [..., prod(obs_shape)]: MLPs take any observation shape."""
    return flat_obs(obs, obs.ndim - len(obs_shape))


class OffPolicy(Agent):
    """A replay-based agent. Subclasses set `TARGET` (the params entry with a target copy), build
    `self.init_params` and `self.optimizer` in `setup`, and write `policy` and `loss`."""

    TARGET: ClassVar[str]
    LossInfo: ClassVar[type]

    def setup(self) -> None:
        self.example = replay.example_transition(self.env)
        self.obs_dim = math.prod(self.obs_shape)

    def init(self, key: jax.Array) -> OffPolicyState:
        k_net, k_env, k_run = jax.random.split(key, 3)
        params = self.init_params(k_net)
        return OffPolicyState(
            params=params,
            target=params[self.TARGET],
            opt_state=self.optimizer.init(params),
            buffer=replay.init(self.config.buffer_size, self.example),
            env_state=self.initial_state(k_env),
            key=k_run,
            update=jnp.int32(0),
            grad_steps=jnp.int32(0),
            last_return=jnp.float32(jnp.nan),
        )

    def loss(self, params, target, batch: replay.Transition, key: jax.Array):
        """(scalar loss to minimise, LossInfo of scalars) on a sampled minibatch [batch_size]."""
        raise NotImplementedError

    def update(self, runner: OffPolicyState):
        """One update: a rollout of num_envs x num_steps into the buffer, then (once the buffer
        holds learning_starts transitions) gradient_steps minibatch steps."""
        c = self.config
        key, k_rollout, k_learn = jax.random.split(runner.key, 3)
        with jax.named_scope("rollout"):
            traj = self.rollout(self.policy(runner), k_rollout, runner.env_state)
        with jax.named_scope("replay"):
            buffer = replay.add(runner.buffer, replay.from_trajectory(traj))
        learner = Learner(runner.params, runner.target, runner.opt_state, runner.grad_steps)

        def learn(learner):
            step = lambda lr, k: self._gradient_step(buffer, lr, k)  # noqa: E731
            learner, info = jax.lax.scan(step, learner, jax.random.split(k_learn, c.gradient_steps))
            return learner, jax.tree.map(jnp.mean, info)

        def wait(learner):
            return learner, jax.tree.map(jnp.zeros_like, jax.eval_shape(learn, learner)[1])

        # Under vmap the predicate is batched and this becomes a select: before learning starts
        # the gradient steps run and are discarded (a few updates of a run).
        learner, info = jax.lax.cond(buffer.size >= c.learning_starts, learn, wait, learner)
        last_return, episodes = latest_return(traj, runner.last_return)
        runner = OffPolicyState(
            params=learner.params,
            target=learner.target,
            opt_state=learner.opt_state,
            buffer=buffer,
            env_state=traj.final_state,
            key=key,
            update=runner.update + 1,
            grad_steps=learner.grad_steps,
            last_return=last_return,
        )
        return runner, self.metrics(runner.update, last_return, episodes, info)

    def _gradient_step(self, buffer: replay.ReplayBuffer, learner: Learner, key: jax.Array):
        c = self.config
        k_sample, k_loss = jax.random.split(key)
        with jax.named_scope("replay"):
            batch = replay.sample(buffer, k_sample, c.batch_size)
        params, opt_state, info = losses.gradient_step(
            lambda p: self.loss(p, learner.target, batch, k_loss),
            self.optimizer,
            learner.params,
            learner.opt_state,
        )
        grad_steps = learner.grad_steps + 1
        with jax.named_scope("target_update"):
            due = grad_steps % c.target_update_every == 0
            target = jax.tree.map(
                lambda t, p: jnp.where(due, c.tau * p + (1.0 - c.tau) * t, t),
                learner.target,
                params[self.TARGET],
            )
        return Learner(params, target, opt_state, grad_steps), info

    def steps_done(self, runner: OffPolicyState) -> jax.Array:
        """Environment steps done so far, per seed, as float32 (what exploration schedules use)."""
        return (runner.update * self.config.steps_per_update).astype(jnp.float32)
