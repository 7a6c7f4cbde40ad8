"""PPO in one file: `make_train(config) -> train(key)`, the whole run one `jax.jit`.

Top to bottom: config, actor-critic, the policy `jaxsim.rollout` steps, GAE, the clipped loss,
one update (rollout, advantages, minibatch epochs), the training loop, an independent evaluation.
Only jaxsim's public API, flax and optax: copy it out. `python examples/ppo_single_file.py`.
"""

import argparse
import dataclasses
import functools
import math
import time

import jax
import jax.numpy as jnp
import optax
from flax import struct

import jaxsim


@dataclasses.dataclass(frozen=True)
class Config:
    """PPO's settings; defaults solve CartPole-v1 (rl-zoo's ppo.yml; 10 epochs at lr 2e-3)."""

    env_id: str = "CartPole-v1"
    """A discrete-action environment id for `jaxsim.make`."""
    num_envs: int = 8
    """Environments stepped in parallel by each rollout."""
    num_steps: int = 32
    """Steps per environment per rollout; a rollout is `num_envs * num_steps` transitions."""
    total_steps: int = 100_000
    """Environment steps of the whole run, rounded down to whole updates."""
    update_epochs: int = 10
    """Passes over each rollout's transitions."""
    num_minibatches: int = 1
    """Minibatches each pass splits the transitions into."""
    learning_rate: float = 2e-3
    """Adam's step size, annealed linearly to 0 over the run."""
    gamma: float = 0.98
    """Discount factor."""
    gae_lambda: float = 0.8
    """GAE's lambda: 0 is one-step TD, 1 is the Monte Carlo return."""
    clip_eps: float = 0.2
    """How far the probability ratio may move from 1 before its gradient is cut."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    ent_coef: float = 0.0
    """Weight of the entropy bonus."""
    max_grad_norm: float = 0.5
    """Gradients are rescaled to at most this global norm."""
    hidden: int = 64
    """Width of the two tanh hidden layers of the actor and of the critic."""

    def __post_init__(self):
        for name in ("num_envs", "num_steps", "total_steps", "update_epochs", "num_minibatches"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Config: {name} must be a positive int, got {value!r}")
        if self.batch_size % self.num_minibatches or self.total_steps < self.batch_size:
            raise ValueError(
                f"Config: num_envs * num_steps = {self.batch_size} must be a multiple of "
                f"num_minibatches={self.num_minibatches} and <= total_steps={self.total_steps}"
            )

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def num_updates(self) -> int:
        return self.total_steps // self.batch_size


# ------------------------------------------------------------------------------- actor-critic
def init_mlp(key: jax.Array, sizes: tuple[int, ...], out_gain: float):
    """Orthogonally initialised layers ((kernel[in, out], bias[out]), ...), first layer first."""
    keys = jax.random.split(key, len(sizes) - 1)
    gains = [math.sqrt(2.0)] * (len(sizes) - 2) + [out_gain]
    return tuple(
        (jaxsim.orthogonal_init(g)(k, (n_in, n_out)), jnp.zeros(n_out))
        for k, g, n_in, n_out in zip(keys, gains, sizes[:-1], sizes[1:], strict=True)
    )


def mlp(layers, x: jax.Array) -> jax.Array:
    """x[..., in] -> [..., out]: tanh between layers, linear at the end."""
    for kernel, bias in layers[:-1]:
        x = jnp.tanh(x @ kernel + bias)
    kernel, bias = layers[-1]
    return x @ kernel + bias


def init_actor_critic(key: jax.Array, obs_dim: int, num_actions: int, hidden: int) -> dict:
    """Separate actor (logits) and critic (value) MLPs; small actor head: near-uniform start."""
    k_actor, k_critic = jax.random.split(key)
    return {
        "actor": init_mlp(k_actor, (obs_dim, hidden, hidden, num_actions), 0.01),
        "critic": init_mlp(k_critic, (obs_dim, hidden, hidden, 1), 1.0),
    }


def value_fn(params: dict, obs: jax.Array) -> jax.Array:
    """obs[..., obs_dim] -> V(obs)[...], over any leading axes ([T, B] or [N])."""
    return mlp(params["critic"], obs)[..., 0]


@struct.dataclass
class Policy:
    """What `jaxsim.rollout` steps: (key, obs[B, obs_dim]) -> action[B], with extras
    {"log_prob": [B]} when sampling. Weights are pytree leaves: new ones reuse the compiled code."""

    params: dict
    greedy: bool = struct.field(pytree_node=False, default=False)

    def __call__(self, key: jax.Array, obs: jax.Array):
        logits = mlp(self.params["actor"], obs)
        if self.greedy:
            return jnp.argmax(logits, axis=-1)
        action = jax.random.categorical(key, logits)
        log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], -1)[:, 0]
        return action, {"log_prob": log_prob}


# ------------------------------------------------------------------------------------ losses
def gae(reward, value, next_value, terminated, done, gamma: float, lam: float):
    """Generalised advantage estimation -> (advantage[T, B], value target[T, B]).

    Every input is [T, B]. `next_value` is V(next_obs), the true next observation: it is
    bootstrapped from unless the episode `terminated`, so a time-limit truncation is not
    mistaken for a failure. `done` (terminated or truncated) stops the recursion at an
    episode's end: step t + 1 then belongs to a fresh episode.
    """
    delta = reward + gamma * next_value * (1.0 - terminated) - value

    def backwards(next_advantage, xs):
        delta_t, done_t = xs
        advantage = delta_t + gamma * lam * (1.0 - done_t) * next_advantage
        return advantage, advantage

    _, advantage = jax.lax.scan(
        backwards, jnp.zeros_like(delta[0]), (delta, done.astype(delta.dtype)), reverse=True
    )
    return advantage, advantage + value


@struct.dataclass
class Batch:
    """A rollout flattened for learning; every leaf has leading [N] (N = num_envs * num_steps)."""

    obs: jax.Array
    action: jax.Array
    log_prob: jax.Array  # of `action` under the policy that collected it
    advantage: jax.Array
    target: jax.Array  # the critic's regression target


def ppo_loss(params: dict, batch: Batch, config: Config):
    """Clipped surrogate + value + entropy loss of a minibatch -> (loss, (policy, value,
    entropy)). Advantages are normalised within the minibatch."""
    log_probs = jax.nn.log_softmax(mlp(params["actor"], batch.obs))
    log_prob = jnp.take_along_axis(log_probs, batch.action[:, None], -1)[:, 0]
    ratio = jnp.exp(log_prob - batch.log_prob)
    adv = (batch.advantage - batch.advantage.mean()) / (batch.advantage.std() + 1e-8)
    clipped = jnp.clip(ratio, 1.0 - config.clip_eps, 1.0 + config.clip_eps)
    policy_loss = -jnp.minimum(ratio * adv, clipped * adv).mean()
    value_loss = 0.5 * jnp.square(value_fn(params, batch.obs) - batch.target).mean()
    entropy = -(jnp.exp(log_probs) * log_probs).sum(-1).mean()
    loss = policy_loss + config.vf_coef * value_loss - config.ent_coef * entropy
    return loss, (policy_loss, value_loss, entropy)


# -------------------------------------------------------------------------------- training
@struct.dataclass
class Runner:
    """Everything the training loop carries from one update to the next."""

    params: dict
    opt_state: optax.OptState
    env_state: jaxsim.RolloutState  # where the environments stand: the next rollout goes on
    key: jax.Array


def make_train(config: Config):
    """`train(key) -> (final Runner, EpisodeStats[num_updates] of the episodes that ended in
    each update's rollout)`. Pure: it jits once, and vmaps over keys (seeds)."""
    env = jaxsim.make(config.env_id)
    obs_space = env.observation_space(env.default_params)
    action_space = env.action_space(env.default_params)
    if not isinstance(action_space, jaxsim.Discrete) or len(obs_space.shape) != 1:
        raise ValueError(
            f"make_train: this PPO needs a Discrete action space and flat observations; "
            f"{config.env_id} has {action_space} and observations {obs_space.shape}"
        )
    optimizer_steps = config.num_updates * config.update_epochs * config.num_minibatches
    schedule = optax.linear_schedule(config.learning_rate, 0.0, optimizer_steps)
    optimizer = optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm), optax.adam(schedule, eps=1e-5)
    )

    def minibatch_step(carry, minibatch: Batch):
        params, opt_state = carry
        with jax.named_scope("loss"):
            (loss, _), grads = jax.value_and_grad(ppo_loss, has_aux=True)(params, minibatch, config)
        with jax.named_scope("optimizer"):
            updates, opt_state = optimizer.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
        return (params, opt_state), loss

    def epoch(batch: Batch, carry, key: jax.Array):
        order = jax.random.permutation(key, config.batch_size)
        minibatches = jax.tree.map(
            lambda x: x[order].reshape(config.num_minibatches, -1, *x.shape[1:]), batch
        )
        return jax.lax.scan(minibatch_step, carry, minibatches)

    def update(runner: Runner, _) -> tuple[Runner, jaxsim.EpisodeStats]:
        key, k_rollout, k_epochs = jax.random.split(runner.key, 3)
        with jax.named_scope("rollout"):
            traj = jaxsim.rollout(
                env,
                Policy(runner.params),
                config.num_steps,
                num_envs=config.num_envs,
                key=k_rollout,
                state=runner.env_state,
            )
        with jax.named_scope("gae"):
            value, next_value = (value_fn(runner.params, o) for o in (traj.obs, traj.next_obs))
            advantage, target = gae(
                traj.reward,
                value,
                next_value,
                traj.terminated,
                traj.done,
                config.gamma,
                config.gae_lambda,
            )
        batch = jax.tree.map(
            lambda x: x.reshape(config.batch_size, *x.shape[2:]),
            Batch(traj.obs, traj.action, traj.extras["log_prob"], advantage, target),
        )
        epoch_keys = jax.random.split(k_epochs, config.update_epochs)
        (params, opt_state), _ = jax.lax.scan(
            functools.partial(epoch, batch), (runner.params, runner.opt_state), epoch_keys
        )
        return Runner(params, opt_state, traj.final_state, key), traj.episode_stats()

    def train(key: jax.Array) -> tuple[Runner, jaxsim.EpisodeStats]:
        k_params, k_env, key = jax.random.split(key, 3)
        params = init_actor_critic(k_params, obs_space.shape[0], action_space.n, config.hidden)
        env_state = jaxsim.initial_state(env, k_env, config.num_envs)
        runner = Runner(params, optimizer.init(params), env_state, key)
        return jax.lax.scan(update, runner, None, config.num_updates)

    return train


# ------------------------------------------------------------------------------ evaluation
def evaluate(env: jaxsim.Env, params: dict, key: jax.Array, num_envs: int = 32, greedy=True):
    """The return of the first episode of each of `num_envs` freshly reset environments ->
    float32[num_envs]. Steps for the time limit, so every environment finishes one episode."""
    steps = env.default_params.max_episode_steps
    outputs = ("terminated", "truncated", "episode_return")  # only what the returns need
    traj = jaxsim.rollout(
        env, Policy(params, greedy), steps, num_envs=num_envs, key=key, outputs=outputs
    )
    first = jnp.argmax(traj.done, axis=0)  # the step each environment's first episode ended
    return traj.episode_return[first, jnp.arange(num_envs)]


def train_and_evaluate(config: Config, num_seeds: int, seed: int = 0):
    """Trains `num_seeds` seeds at once (one vmapped jit), then evaluates each on environments
    of its own key, unseen in training -> (returns[num_seeds, 32], compile s, training s)."""
    train_key, eval_key = jax.random.split(jax.random.key(seed))
    train_keys = jax.random.split(train_key, num_seeds)
    start = time.perf_counter()
    train = jax.jit(jax.vmap(make_train(config))).lower(train_keys).compile()
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    runner, _ = jax.block_until_ready(train(train_keys))
    train_s = time.perf_counter() - start
    env, eval_keys = jaxsim.make(config.env_id), jax.random.split(eval_key, num_seeds)
    returns = jax.jit(jax.vmap(lambda p, k: evaluate(env, p, k)))(runner.params, eval_keys)
    return jax.device_get(returns), compile_s, train_s


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds trained at once (vmapped)")
    parser.add_argument("--seed", type=int, default=0, help="the key every seed's key comes from")
    parser.add_argument("--total-steps", type=int, default=Config.total_steps)
    args = parser.parse_args()
    config = Config(total_steps=args.total_steps)
    returns, compile_s, train_s = train_and_evaluate(config, args.seeds, args.seed)
    steps = config.num_updates * config.batch_size
    for i, seed_returns in enumerate(returns):
        print(f"seed {i}: evaluation return {seed_returns.mean():.1f} (min {seed_returns.min()})")
    print(f"{config.env_id}, {steps} steps per seed: mean evaluation return {returns.mean():.1f}")
    print(f"wall time: compile {compile_s:.2f} s, training {train_s:.2f} s (seeds at once)")
