"""PPO as one jitted training loop on jaxsim: `make_train(config, env) -> train(key)`.

A run is a `lax.scan` of updates; an update is a rollout (`jaxsim.rollout`), GAE, and epochs of
minibatch steps. Everything a run needs to continue, the PRNG key included, lives in
`RunnerState`, so `run(run(s, k), n - k)` equals `run(s, n)` bit for bit and a checkpoint at any
update boundary resumes exactly. Seeds train at once as `jit(vmap(train))`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax

import jaxsim
from agents import losses
from agents.agent import Agent, latest_return
from agents.config import AgentConfig, config_field, override
from agents.networks import NETWORKS, actor_critic_init, to_policy
from agents.normalizers import observation_normalizer, reward_scaler
from agents.structs import Batch, LossInfo, Metrics, RunnerState, TrainState
from agents.sweep import train_fn


@dataclasses.dataclass(frozen=True)
class PPOConfig(AgentConfig):
    """Every knob of a PPO run. Defaults are purejaxrl's CartPole settings.

    Each field's help documents it here and is the text of its `agents.train` flag.
    """

    total_steps: int = override(AgentConfig, "total_steps", 500_000)
    num_steps: int = override(
        AgentConfig,
        "num_steps",
        128,
        "Steps per environment in each rollout (the horizon between updates).",
    )
    learning_rate: float = override(
        AgentConfig, "learning_rate", 2.5e-4, "Adam step size (the initial one when annealed)."
    )
    hidden: tuple[int, ...] = override(
        AgentConfig, "hidden", (64, 64), "Hidden layer widths of both actor and critic."
    )
    log_every: int = override(AgentConfig, "log_every", 50)
    rollout_backend: str = override(
        AgentConfig,
        "rollout_backend",
        "auto",
        '`jaxsim.rollout` backend: "auto" picks the fused kernel where it exists, else "scan".',
    )
    network: str = config_field(
        "mlp",
        "Actor-critic: 'mlp' (separate tanh MLPs of `hidden` on the flattened observation) or "
        "'cnn' (image observations: a 3x3 conv of conv_channels, then ReLU dense layers of "
        "`hidden`, shared by linear actor and critic heads).",
        choices=NETWORKS,
    )
    conv_channels: int = config_field(16, "Channels of the 'cnn' network's conv.", ge=1)
    update_epochs: int = config_field(4, "Passes over each rollout's batch.", ge=1)
    num_minibatches: int = config_field(
        4, "Minibatches per epoch; must divide num_envs * num_steps.", ge=1
    )
    anneal_lr: bool = config_field(True, "Decay the learning rate linearly to 0 over the run.")
    gae_lambda: float = config_field(0.95, "GAE's lambda.", ge=0, le=1)
    clip_eps: float = config_field(
        0.2,
        "Clipping range of the probability ratio (and of the value change if clip_value).",
        gt=0,
    )
    clip_value: bool = config_field(True, "Clip the value loss around the old values (PPO2).")
    ent_coef: float = config_field(0.01, "Weight of the entropy bonus.", ge=0)
    vf_coef: float = config_field(0.5, "Weight of the value loss.", ge=0)
    max_grad_norm: float = config_field(0.5, "Global gradient-norm clipping threshold.", gt=0)
    adam_eps: float = config_field(1e-5, "Adam's epsilon.", gt=0)
    normalize_advantages: bool = config_field(True, "Standardise advantages per minibatch.")
    normalize_obs: bool = config_field(
        False, "Normalise observations by running mean and std (folded into the first layers)."
    )
    scale_rewards: bool = config_field(
        False, "Divide rewards by the running std of the discounted return."
    )
    init_log_std: float = config_field(
        0.0, "Initial log std of the Gaussian policy (Box action spaces only)."
    )

    @property
    def batch_size(self) -> int:
        """Transitions per update: num_envs * num_steps."""
        return self.steps_per_update

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches

    def validate(self) -> None:
        super().validate()
        if self.batch_size % self.num_minibatches:
            self.fail(
                f"num_minibatches={self.num_minibatches} does not divide the batch of "
                f"num_envs * num_steps = {self.batch_size}"
            )
        if self.network == "cnn" and self.normalize_obs:
            self.fail("normalize_obs folds into an MLP's first layer; network='cnn' takes none")
        if self.network == "cnn" and self.rollout_backend == "fused":
            self.fail(
                "network='cnn' runs on the scan backend only (the fused kernel evaluates MLP "
                "policies): rollout_backend='fused' cannot run it; use 'scan' or 'auto'"
            )


def ppo_optimizer(config: PPOConfig) -> optax.GradientTransformation:
    """Adam after global-norm clipping, its learning rate annealed linearly to 0 over the run's
    gradient steps where `anneal_lr`. On one flat vector: a dozen parameter arrays would each get
    their own clip and Adam ops, about a third of the training loop's program (and of its
    compile time)."""
    lr = config.learning_rate
    if config.anneal_lr:
        grad_steps = config.update_epochs * config.num_minibatches
        lr = optax.linear_schedule(lr, 0.0, config.num_updates * grad_steps)
    return optax.flatten(
        optax.chain(
            optax.clip_by_global_norm(config.max_grad_norm), optax.adam(lr, eps=config.adam_eps)
        )
    )


class PPOLearner:
    """PPO's learning half, apart from any environment: networks, optimiser, normalisers and
    `learn` (GAE, then epochs of minibatch steps on one batch of transitions).

    `PPO` holds one (its rollouts come from `jaxsim.rollout`); `agents.decoupled` holds one too
    and runs the same `learn` on segments that actor threads collect from host simulators.
    """

    def __init__(self, config: PPOConfig, obs_space, action_space, env_name: str):
        """Builds the networks' init, the normalisers and the optimiser for these spaces
        (`jaxsim.Box` observations; `jaxsim.Discrete` or rank-1 `jaxsim.Box` actions)."""
        self.config = config
        self.init_params = actor_critic_init(
            obs_space,
            action_space,
            config.hidden,
            config.init_log_std,
            env_name,
            network=config.network,
            conv_channels=config.conv_channels,
        )
        self.obs_norm = observation_normalizer(obs_space.shape)
        self.reward_scaler = reward_scaler(config.num_envs, config.gamma)
        self.optimizer = ppo_optimizer(config)

    def learn(
        self,
        train: TrainState,
        obs_stats,
        reward_state,
        traj,
        key: jax.Array,
        advantages: Callable | None = None,
    ):
        """One update's learning from a batch of transitions -> (TrainState, obs_stats,
        reward_state, LossInfo of means over its minibatch steps).

        Args:
          train: the parameters and optimiser state to update.
          obs_stats, reward_state: the normalisers' states (passed through when they are off).
          traj: a `jaxsim.Trajectory` or anything with its fields `obs`, `action`, `reward`,
            `terminated`, `truncated`, `next_obs` ([T, B, ...], B = config.num_envs) and
            `extras["log_prob"]`, `extras["value"]` of the policy that acted.
          key: draws the minibatches.
          advantages: `(policy, traj, reward) -> (advantage[T, B], target[T, B], value[T, B])`
            replaces GAE (`value` is what the clipped value loss clips around); the default
            is GAE on the acting policy's values (`agents.decoupled` passes V-trace).
        """
        c = self.config
        policy = to_policy(train.params, obs_stats if c.normalize_obs else None)
        with jax.named_scope("gae"):
            reward = traj.reward
            if c.scale_rewards:
                done = traj.terminated | traj.truncated
                reward_state, reward = self.reward_scaler.update(reward_state, reward, done)
            if advantages is None:
                # Only the critic's output is used: XLA drops the actor's half of evaluate.
                _, _, next_value = policy.evaluate(traj.next_obs, traj.action)
                value = traj.extras["value"]
                advantage, target = losses.gae(
                    reward,
                    value,
                    next_value,
                    traj.terminated,
                    traj.truncated,
                    c.gamma,
                    c.gae_lambda,
                )
            else:
                advantage, target, value = advantages(policy, traj, reward)
        batch = Batch(
            obs=traj.obs,
            action=traj.action,
            log_prob=traj.extras["log_prob"],
            value=value,
            advantage=advantage,
            target=target,
        )
        batch = jax.tree.map(lambda x: x.reshape((c.batch_size, *x.shape[2:])), batch)
        loss_stats = obs_stats if c.normalize_obs else None
        if c.num_minibatches == 1:
            # One minibatch is the whole batch, and the loss is a mean over it: shuffling would
            # change nothing but the order of a sum, and costs a sort (and its compile) an epoch.
            def epoch(train, _):
                return self._minibatch(loss_stats, train, batch)

            train, info = jax.lax.scan(epoch, train, length=c.update_epochs)
        else:
            epoch = functools.partial(self._epoch, loss_stats, batch)
            train, info = jax.lax.scan(epoch, train, jax.random.split(key, c.update_epochs))
        if c.normalize_obs:
            obs_stats = self.obs_norm.update(obs_stats, traj.obs)
        return train, obs_stats, reward_state, jax.tree.map(jnp.mean, info)

    def _epoch(self, obs_stats, batch: Batch, train: TrainState, key: jax.Array):
        c = self.config
        with jax.named_scope("shuffle"):
            perm = jax.random.permutation(key, c.batch_size)
            minibatches = jax.tree.map(
                lambda x: x[perm].reshape((c.num_minibatches, c.minibatch_size, *x.shape[1:])),
                batch,
            )
        return jax.lax.scan(functools.partial(self._minibatch, obs_stats), train, minibatches)

    def _minibatch(self, obs_stats, train: TrainState, mb: Batch):
        loss_fn = functools.partial(self._loss, obs_stats=obs_stats, mb=mb)
        params, opt_state, info = losses.gradient_step(
            loss_fn, self.optimizer, train.params, train.opt_state
        )
        return TrainState(params, opt_state), info

    def _loss(self, params, obs_stats, mb: Batch):
        c = self.config
        log_prob, entropy, value = to_policy(params, obs_stats).evaluate(mb.obs, mb.action)
        advantage = mb.advantage
        if c.normalize_advantages:
            advantage = losses.normalize_advantage(advantage)
        policy_loss, approx_kl, clip_fraction = losses.clipped_policy_loss(
            log_prob, mb.log_prob, advantage, c.clip_eps
        )
        v_loss = losses.value_loss(value, mb.value, mb.target, c.clip_eps if c.clip_value else None)
        entropy = losses.entropy_bonus(entropy)
        total = policy_loss + c.vf_coef * v_loss - c.ent_coef * entropy
        return total, LossInfo(total, policy_loss, v_loss, entropy, approx_kl, clip_fraction)


class PPO(Agent):
    """PPO on one jaxsim environment: `init(key)`, `update(runner)`, `run(runner, n)`, `evaluate`.

    An update is a rollout (`Agent.rollout`, i.e. `jaxsim.rollout`) and the learner's `learn`
    (GAE, the losses in `agents.losses`, the optimiser step). See `agents.agent.Agent` for what
    every agent shares (the run loop, progress, evaluation).
    """

    name = "ppo"
    config_type = PPOConfig

    def setup(self) -> None:
        obs_space = self.env.observation_space(self.env.default_params)
        self.learner = PPOLearner(self.config, obs_space, self.action_space, self.env.id)

    # ------------------------------------------------------------------------------------ state
    def init(self, key: jax.Array) -> RunnerState:
        k_net, k_env, k_run = jax.random.split(key, 3)
        learner = self.learner
        return RunnerState.start(
            learner.init_params(k_net),
            learner.optimizer,
            learner.obs_norm,
            learner.reward_scaler,
            self.initial_state(k_env),
            k_run,
        )

    def policy(self, runner: RunnerState, deterministic: bool = False):
        """The runner's policy over raw observations: a `jaxsim.MLPPolicy` (or a CNNPolicy)."""
        obs_stats = runner.obs_stats if self.config.normalize_obs else None
        return to_policy(runner.params, obs_stats, deterministic)

    # ----------------------------------------------------------------------------------- update
    def update(self, runner: RunnerState) -> tuple[RunnerState, Metrics]:
        """One PPO update: a rollout of num_envs x num_steps, GAE, epochs of minibatch steps."""
        key, k_rollout, k_epochs = jax.random.split(runner.key, 3)
        policy = self.policy(runner)
        with jax.named_scope("rollout"):
            traj = self.rollout(policy, k_rollout, runner.env_state)
        train, obs_stats, reward_state, info = self.learner.learn(
            TrainState(runner.params, runner.opt_state),
            runner.obs_stats,
            runner.reward_state,
            traj,
            k_epochs,
        )
        last_return, episodes = latest_return(traj, runner.last_return)
        runner = RunnerState(
            params=train.params,
            opt_state=train.opt_state,
            obs_stats=obs_stats,
            reward_state=reward_state,
            env_state=traj.final_state,
            key=key,
            update=runner.update + 1,
            last_return=last_return,
        )
        return runner, self.metrics(runner.update, last_return, episodes, info)


def make_train(
    config: PPOConfig,
    env: jaxsim.Env,
    progress: Callable[[Metrics], None] | None = None,
    mesh=None,
    *,
    env_params=None,
    params_sampler=None,
    sweep=None,
) -> Callable[[jax.Array], tuple[RunnerState, Metrics]]:
    """train(key) -> (final RunnerState, Metrics[num_updates]); jit it, or jit(vmap(train)).

    With a `mesh`, rollouts are split over its `jaxsim.ENV_AXIS` axis. The training rollouts
    run on `env_params` (leaves shared or [num_envs, ...]) and draw `params_sampler`'s fields
    every episode (see `Agent`). `sweep` ({name: values} of float hyperparameters,
    `agents.sweep`): every configuration of the grid in one program, leaves [num_configs, ...]."""
    agent = PPO(config, env, env_params, progress, mesh, params_sampler=params_sampler)
    return train_fn(agent, sweep)
