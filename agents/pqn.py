"""PQN (Gallici et al., "Simplifying Deep Temporal Difference Learning", ICLR 2025) on jaxsim.

No replay buffer and no target network: a LayerNorm Q-network acts epsilon-greedily on a
vectorised rollout (`jaxsim.rollout` over `num_envs` environments), Peng's Q(lambda) returns are
computed backwards over the rollout with the network that acted, then `update_epochs` passes of
`num_minibatches` minibatch regressions onto them (squared or Huber error), through RAdam (the
paper's) or Adam with gradient-norm clipping. Epsilon falls linearly. `make_train(config, env)
-> train(key)`, one jit, as every agent here.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import optax
from flax import struct

import jaxsim
from agents import losses
from agents.agent import Agent, latest_return
from agents.config import AgentConfig, config_field, override
from agents.networks import HIDDEN_GAIN
from agents.offpolicy import flatten_obs
from agents.structs import Metrics
from agents.sweep import train_fn
from jaxsim.policies import init_mlp

OPTIMIZERS = ("radam", "adam")
LOSSES = ("mse", "huber")


@dataclasses.dataclass(frozen=True)
class PQNConfig(AgentConfig):
    """Every knob of a PQN run. Defaults are PureJaxQL's CartPole-v1 settings (pqn_cartpole.yaml:
    32 envs x 64 steps, 4 epochs of 16 minibatches, lr 1e-4 annealed, RAdam, gradient norm 10,
    lambda 0.95, rewards x 0.1, epsilon 1 -> 0.2 over 20% of the run, a 256-256 LayerNorm net)."""

    total_steps: int = override(AgentConfig, "total_steps", 500_000)
    num_envs: int = override(AgentConfig, "num_envs", 32)
    num_steps: int = override(
        AgentConfig,
        "num_steps",
        64,
        "Steps per environment in each rollout (the horizon of the lambda-returns).",
    )
    learning_rate: float = override(
        AgentConfig,
        "learning_rate",
        1e-4,
        "Step size of the optimizer (the initial one when annealed).",
    )
    hidden: tuple[int, ...] = override(
        AgentConfig,
        "hidden",
        (256, 256),
        "Hidden layer widths of the Q-network (dense, LayerNorm if layer_norm, ReLU).",
    )
    log_every: int = override(AgentConfig, "log_every", 20)
    rollout_backend: str = override(
        AgentConfig,
        "rollout_backend",
        "scan",
        '`jaxsim.rollout` backend ("auto" takes "scan" for this policy; "fused" if asked: '
        "interpreted on the CPU, it takes the scan's actions).",
    )
    q_lambda: float = config_field(
        0.95,
        "Lambda of the Q(lambda) returns: 0 is one-step Q-learning, 1 the Monte Carlo return "
        "(bootstrapped at the rollout's end and at truncations).",
        ge=0,
        le=1,
    )
    update_epochs: int = config_field(4, "Passes over each rollout's batch.", ge=1)
    num_minibatches: int = config_field(
        16, "Minibatches per epoch; must divide num_envs * num_steps.", ge=1
    )
    start_e: float = config_field(
        1.0, "Epsilon (random-action probability) at the start.", ge=0, le=1
    )
    end_e: float = config_field(0.2, "Epsilon after the exploration phase.", ge=0, le=1)
    exploration_fraction: float = config_field(
        0.2,
        "Fraction of total_steps over which epsilon falls linearly from start_e to end_e.",
        gt=0,
        le=1,
    )
    optimizer: str = config_field(
        "radam", "Optimizer: 'radam' (the paper's) or 'adam'.", choices=OPTIMIZERS
    )
    anneal_lr: bool = config_field(
        True, "Decay the learning rate linearly to 0 over the run's gradient steps."
    )
    max_grad_norm: float = config_field(10.0, "Global gradient-norm clipping threshold.", gt=0)
    loss: str = config_field(
        "mse",
        "Regression loss onto the lambda-returns: 'mse' (half the squared error) or 'huber' "
        "(squared up to huber_delta, linear beyond).",
        choices=LOSSES,
    )
    huber_delta: float = config_field(1.0, "Huber's delta (loss='huber' only).", gt=0)
    layer_norm: bool = config_field(
        True, "LayerNorm after every hidden dense layer (what lets PQN drop the target network)."
    )
    reward_scale: float = config_field(
        0.1, "Rewards are multiplied by this in the returns (evaluation reports raw ones).", gt=0
    )

    @property
    def batch_size(self) -> int:
        """Transitions per update: num_envs * num_steps."""
        return self.steps_per_update

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches

    @property
    def total_gradient_steps(self) -> int:
        return self.num_updates * self.update_epochs * self.num_minibatches

    def validate(self) -> None:
        super().validate()
        if self.batch_size % self.num_minibatches:
            self.fail(
                f"num_minibatches={self.num_minibatches} does not divide the batch of "
                f"num_envs * num_steps = {self.batch_size}"
            )


# ------------------------------------------------------------------------------------ returns
def q_lambda_returns(
    reward: jax.Array,
    next_q_max: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    gamma: float,
    q_lambda: float,
) -> jax.Array:
    """Peng's Q(lambda) returns over a rollout with same-step auto-reset, computed backwards:

        G[t] = r[t] + gamma * (1 - terminated[t]) * ((1 - l[t]) * M[t] + l[t] * G[t + 1])

    with M[t] = max_a Q(next_obs[t], a) and l[t] = lambda, except l[t] = 0 where the episode
    ended at t (the next step belongs to a new episode) and at the last step (the rollout's
    horizon): a truncated step bootstraps fully on the true next observation
    (`Trajectory.next_obs`), a terminated one not at all.

    Args:
      reward: [T, B] rewards (already scaled).
      next_q_max: [T, B] max_a Q(next_obs[t], a) of the network that acted.
      terminated: [T, B] bool, the MDP ended at step t.
      truncated: [T, B] bool, the time limit cut the episode at step t.
      gamma: discount.
      q_lambda: lambda.

    Returns:
      returns[T, B], no gradient.
    """
    not_terminated = 1.0 - terminated.astype(jnp.float32)
    lam = q_lambda * (1.0 - (terminated | truncated).astype(jnp.float32))

    def step(next_return, x):
        r, m, alive, l = x
        g = r + gamma * alive * ((1.0 - l) * m + l * next_return)
        return g, g

    # After the last step the return is M[T - 1] itself: (1 - l) M + l M = M, whatever l.
    _, returns = jax.lax.scan(
        step, next_q_max[-1], (reward, next_q_max, not_terminated, lam), reverse=True, unroll=8
    )
    return jax.lax.stop_gradient(returns)


# ------------------------------------------------------------------------------------ network
def init_q_network(key: jax.Array, sizes: tuple[int, ...], layer_norm: bool) -> dict[str, Any]:
    """The Q-network's params: `{"dense": Layers, "norm": ((scale, bias), ...)}`.

    `sizes` runs from the flattened observation to num_actions. Orthogonal kernels (gain sqrt 2
    hidden, 1 head), zero biases; each hidden layer's LayerNorm starts at scale 1, bias 0
    (`norm` is empty without LayerNorm).
    """
    hidden = sizes[1:-1]
    dense = init_mlp(key, sizes, (HIDDEN_GAIN,) * len(hidden) + (1.0,))
    norm = tuple((jnp.ones(n, jnp.float32), jnp.zeros(n, jnp.float32)) for n in hidden)
    return {"dense": dense, "norm": norm if layer_norm else ()}


def _layer_norm(x: jax.Array, scale: jax.Array, bias: jax.Array) -> jax.Array:
    mean = x.mean(-1, keepdims=True)
    var = jnp.square(x - mean).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-6) * scale + bias


def q_values(params: dict[str, Any], obs: jax.Array) -> jax.Array:
    """x[..., obs_dim] (float) -> Q[..., num_actions]: dense, LayerNorm (if any), ReLU per hidden
    layer, a linear head."""
    *hidden, (w_out, b_out) = params["dense"]
    for i, (w, b) in enumerate(hidden):
        obs = jnp.matmul(obs, w, precision=jax.lax.Precision.HIGHEST) + b
        if params["norm"]:
            obs = _layer_norm(obs, *params["norm"][i])
        obs = jax.nn.relu(obs)
    return jnp.matmul(obs, w_out, precision=jax.lax.Precision.HIGHEST) + b_out


@struct.dataclass
class QPolicy:
    """argmax_a Q(obs, a), or a uniform action with probability `epsilon`; a jaxsim.rollout policy
    (the scan backend) over raw observations of any shape and dtype."""

    q: dict[str, Any]  # init_q_network's params
    epsilon: jax.Array  # float32 scalar
    num_actions: int = struct.field(pytree_node=False)
    obs_shape: tuple[int, ...] = struct.field(pytree_node=False)

    def __call__(self, key: jax.Array, obs: jax.Array) -> jax.Array:
        index = jnp.arange(obs.shape[0], dtype=jnp.uint32)
        return self.act_from_seed(jaxsim.rng.seed_from_key(key), index, obs)

    def act_from_seed(self, seed, index, obs) -> jax.Array:
        q = q_values(self.q, flatten_obs(obs, self.obs_shape))
        greedy = jnp.argmax(q, axis=-1).astype(jnp.int32)
        # Counter 1 and 2, as DQN's policy: RandomPolicy's draws use counter 0 of the stream.
        coin = jaxsim.rng.uniform(seed, index, 1, jaxsim.rng.POLICY_STREAM)
        uniform = jaxsim.rng.randint(seed, index, 2, jaxsim.rng.POLICY_STREAM, self.num_actions)
        return jnp.where(coin < self.epsilon, uniform.astype(jnp.int32), greedy)


# -------------------------------------------------------------------------------------- agent
@struct.dataclass
class PQNState:
    """Everything a PQN run carries between updates (a seed axis under vmap)."""

    params: dict[str, Any]  # the Q-network: init_q_network
    opt_state: Any
    env_state: jaxsim.RolloutState
    key: jax.Array
    update: jax.Array  # int32: updates done
    last_return: jax.Array  # float32: mean return of the latest finished episodes (NaN: none yet)


@struct.dataclass
class PQNTrainState:
    """The part of PQNState that minibatch steps change."""

    params: dict[str, Any]
    opt_state: Any


@struct.dataclass
class PQNBatch:
    """One update's transitions, flattened to [N, ...] (N = num_envs * num_steps)."""

    obs: jax.Array  # flattened, float32
    action: jax.Array
    target: jax.Array  # the Q(lambda) return


@struct.dataclass
class PQNLossInfo:
    COLUMNS: ClassVar[dict[str, str]] = {
        "q_loss": "q_loss",
        "q_value": "q_value",
        "epsilon": "epsilon",
    }

    q_loss: jax.Array
    q_value: jax.Array  # mean Q of the actions taken, over the minibatch
    epsilon: jax.Array  # the rollout's


class PQN(Agent):
    """PQN on one jaxsim environment with Discrete actions: `init(key)`, `update(runner)`,
    `run(runner, n)`, `evaluate` (greedy). See `agents.agent.Agent` for what every agent shares."""

    name = "pqn"
    config_type = PQNConfig

    def setup(self) -> None:
        space = self.action_space
        if not isinstance(space, jaxsim.Discrete):
            raise ValueError(
                f"PQN: {self.env.id} has action space {space}; PQN needs a Discrete action "
                "space (use sac or ppo for Box actions)"
            )
        c = self.config
        self.num_actions = int(space.n)
        sizes = (math.prod(self.obs_shape), *c.hidden, self.num_actions)
        self.init_params = functools.partial(init_q_network, sizes=sizes, layer_norm=c.layer_norm)
        lr = c.learning_rate
        if c.anneal_lr:
            lr = optax.linear_schedule(lr, 0.0, c.total_gradient_steps)
        make = optax.radam if c.optimizer == "radam" else optax.adam
        # On one flat vector, as PPO's: one clip and one Adam instead of one per array.
        self.optimizer = optax.flatten(
            optax.chain(optax.clip_by_global_norm(c.max_grad_norm), make(lr))
        )

    def init(self, key: jax.Array) -> PQNState:
        k_net, k_env, k_run = jax.random.split(key, 3)
        params = self.init_params(k_net)
        return PQNState(
            params=params,
            opt_state=self.optimizer.init(params),
            env_state=self.initial_state(k_env),
            key=k_run,
            update=jnp.int32(0),
            last_return=jnp.float32(jnp.nan),
        )

    def epsilon(self, runner: PQNState) -> jax.Array:
        """The acting epsilon: start_e falling linearly to end_e over exploration_fraction of
        total_steps, by the steps done before this update's rollout."""
        c = self.config
        steps = (runner.update * c.steps_per_update).astype(jnp.float32)
        progress = steps / (c.exploration_fraction * c.total_steps)
        return c.start_e + (c.end_e - c.start_e) * jnp.minimum(progress, 1.0)

    def policy(self, runner: PQNState, deterministic: bool = False) -> QPolicy:
        """Epsilon-greedy on the Q-network; greedy (epsilon 0) if deterministic."""
        epsilon = jnp.float32(0.0) if deterministic else self.epsilon(runner)
        return QPolicy(runner.params, epsilon, self.num_actions, self.obs_shape)

    def update(self, runner: PQNState) -> tuple[PQNState, Metrics]:
        """One PQN update: a rollout of num_envs x num_steps, Q(lambda) returns, epochs of
        minibatch regression onto them."""
        c = self.config
        key, k_rollout, k_epochs = jax.random.split(runner.key, 3)
        epsilon = self.epsilon(runner)
        with jax.named_scope("rollout"):
            traj = self.rollout(self.policy(runner), k_rollout, runner.env_state)
        with jax.named_scope("lambda_returns"):
            next_q = q_values(runner.params, flatten_obs(traj.next_obs, self.obs_shape))
            target = q_lambda_returns(
                traj.reward * c.reward_scale,
                next_q.max(-1),
                traj.terminated,
                traj.truncated,
                c.gamma,
                c.q_lambda,
            )
        batch = PQNBatch(flatten_obs(traj.obs, self.obs_shape), traj.action, target)
        batch = jax.tree.map(lambda x: x.reshape((c.batch_size, *x.shape[2:])), batch)
        train = PQNTrainState(runner.params, runner.opt_state)
        epoch = functools.partial(self._epoch, batch)
        train, info = jax.lax.scan(epoch, train, jax.random.split(k_epochs, c.update_epochs))
        info = jax.tree.map(jnp.mean, info).replace(epsilon=epsilon)
        last_return, episodes = latest_return(traj, runner.last_return)
        runner = PQNState(
            params=train.params,
            opt_state=train.opt_state,
            env_state=traj.final_state,
            key=key,
            update=runner.update + 1,
            last_return=last_return,
        )
        return runner, self.metrics(runner.update, last_return, episodes, info)

    def _epoch(self, batch: PQNBatch, train: PQNTrainState, key: jax.Array):
        c = self.config
        with jax.named_scope("shuffle"):
            perm = jax.random.permutation(key, c.batch_size)
            minibatches = jax.tree.map(
                lambda x: x[perm].reshape((c.num_minibatches, c.minibatch_size, *x.shape[1:])),
                batch,
            )
        return jax.lax.scan(self._minibatch, train, minibatches)

    def _minibatch(self, train: PQNTrainState, mb: PQNBatch):
        params, opt_state, info = losses.gradient_step(
            functools.partial(self.loss, mb=mb), self.optimizer, train.params, train.opt_state
        )
        return PQNTrainState(params, opt_state), info

    def loss(self, params, mb: PQNBatch):
        """(scalar loss, PQNLossInfo) of Q(obs, action) against the returns, minibatch [N]."""
        c = self.config
        q_all = q_values(params, mb.obs)
        q = jnp.take_along_axis(q_all, mb.action[:, None].astype(jnp.int32), axis=-1)[:, 0]
        if c.loss == "huber":
            q_loss = optax.huber_loss(q, mb.target, delta=c.huber_delta).mean()
        else:
            q_loss = 0.5 * jnp.square(q - mb.target).mean()
        return q_loss, PQNLossInfo(q_loss, q.mean(), jnp.float32(0.0))


def make_train(
    config: PQNConfig,
    env: jaxsim.Env,
    progress: Callable[[Metrics], None] | None = None,
    mesh=None,
    *,
    env_params=None,
    params_sampler=None,
    sweep=None,
) -> Callable[[jax.Array], tuple[PQNState, Metrics]]:
    """train(key) -> (final PQNState, Metrics[num_updates]); jit it, or jit(vmap(train)).

    With a `mesh`, rollouts are split over its `jaxsim.ENV_AXIS` axis. The training rollouts
    run on `env_params` (leaves shared or [num_envs, ...]) and draw `params_sampler`'s fields
    every episode (see `agents.agent.Agent`). `sweep`: every configuration of a grid of float
    hyperparameters in one program (`agents.sweep`)."""
    agent = PQN(config, env, env_params, progress, mesh, params_sampler=params_sampler)
    return train_fn(agent, sweep)
