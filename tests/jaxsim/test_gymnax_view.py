"""`jaxsim.gymnax_view.as_gymnax`: gymnax's interface over jaxsim environments, down to a PPO."""

from __future__ import annotations

import dataclasses
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import struct

import jaxsim
from jaxsim.gymnax_view import as_gymnax

BATCH = 8


def _tree_equal(a, b) -> bool:
    return all(jax.tree.leaves(jax.tree.map(lambda x, y: bool(jnp.array_equal(x, y)), a, b)))


# -- interface -------------------------------------------------------------------------------------
@pytest.mark.parametrize("env_id", ["CartPole-v1", "MinAtar/Breakout-v1"])
def test_vmapped_jitted_reset_and_step_have_gymnax_shapes_and_dtypes(env_id):
    env = as_gymnax(env_id)
    params = env.default_params
    obs_space, act_space = env.observation_space(params), env.action_space(params)
    assert env.name == env_id and env.num_actions == act_space.n
    assert isinstance(params, type(jaxsim.make(env_id).default_params))

    @jax.jit
    def reset_and_step(key):
        k_reset, k_act, k_step = jax.random.split(key, 3)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(k_reset, BATCH), params
        )
        actions = jax.vmap(act_space.sample)(jax.random.split(k_act, BATCH))
        step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
        return obs, state, step(jax.random.split(k_step, BATCH), state, actions, params)

    obs, state, (obs2, state2, reward, done, info) = reset_and_step(jax.random.key(0))
    for o in (obs, obs2, info["final_obs"]):
        assert o.shape == (BATCH, *obs_space.shape) and o.dtype == obs_space.dtype
        assert bool(jax.vmap(obs_space.contains)(o).all())
    assert jax.tree.structure(state) == jax.tree.structure(state2)
    assert all(leaf.shape[0] == BATCH for leaf in jax.tree.leaves(state2))
    assert reward.shape == (BATCH,) and reward.dtype == jnp.float32
    assert done.shape == (BATCH,) and done.dtype == jnp.bool_
    assert set(info) == {"discount", "terminated", "truncated", "final_obs"}
    assert info["discount"].dtype == jnp.float32
    assert info["terminated"].dtype == info["truncated"].dtype == jnp.bool_
    np.testing.assert_array_equal(done, info["terminated"] | info["truncated"])
    np.testing.assert_array_equal(info["discount"], 1.0 - info["terminated"])


def test_spaces_carry_gymnax_attributes():
    cartpole = as_gymnax("CartPole-v1")
    discrete = cartpole.action_space()
    assert (discrete.n, discrete.shape, discrete.dtype) == (2, (), jnp.int32)
    assert bool(discrete.contains(discrete.sample(jax.random.key(1))))
    box = cartpole.observation_space(cartpole.default_params)
    assert box.shape == (4,) and box.dtype == jnp.float32
    assert box.low.shape == box.high.shape == (4,)
    pendulum = as_gymnax("Pendulum-v1")
    assert pendulum.num_actions == 1
    for box in (pendulum.observation_space(), pendulum.action_space()):
        assert box.low.shape == box.high.shape == box.shape and box.dtype == jnp.float32
        assert bool(box.contains(box.sample(jax.random.key(2))))
    grid = as_gymnax("MinAtar/Breakout-v1").observation_space()
    assert grid.shape == (10, 10, 4) and grid.dtype == jnp.bool_


def test_view_is_hashable_static_and_a_leafless_pytree():
    view = as_gymnax("CartPole-v1", max_episode_steps=50)
    same = as_gymnax(jaxsim.make("CartPole-v1", max_episode_steps=50))
    assert view == same and hash(view) == hash(same) and as_gymnax(view) is view
    assert view != as_gymnax("CartPole-v1")
    assert jax.tree.leaves(view) == []
    traces = []

    def first_obs(v, key):
        traces.append(v)
        return v.reset(key)[0]

    static = jax.jit(first_obs, static_argnums=0)
    as_argument = jax.jit(first_obs)
    key = jax.random.key(3)
    for fn in (static, as_argument):
        np.testing.assert_array_equal(fn(view, key), fn(same, key))
    assert len(traces) == 2  # one trace each: the equal view reuses the compiled program


def test_params_may_carry_per_environment_leaves():
    env = as_gymnax("CartPole-v1")
    params = env.default_params.replace(force_mag=jnp.linspace(1.0, 20.0, BATCH))
    axes = jax.tree.map(lambda _: None, env.default_params).replace(force_mag=0)
    keys = jax.random.split(jax.random.key(4), BATCH)
    _, state = jax.vmap(env.reset, in_axes=(None, axes))(keys[0], params)
    actions = jnp.ones(BATCH, jnp.int32)
    obs, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, axes))(keys, state, actions, params)
    for i in (0, BATCH - 1):
        one = env.default_params.replace(force_mag=params.force_mag[i])
        single_state = jax.tree.map(lambda x, i=i: x[i], state)
        np.testing.assert_array_equal(obs[i], env.step(keys[i], single_state, 1, one)[0])
    assert not np.allclose(obs[0], obs[-1])  # the push differed


def test_bad_env_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match=r"as_gymnax: env must be a jaxsim Env .* got int 3"):
        as_gymnax(3)
    with pytest.raises(TypeError, match=r"max_episode_steps.*pass its id"):
        as_gymnax(jaxsim.make("CartPole-v1"), max_episode_steps=5)


# -- auto-reset ------------------------------------------------------------------------------------
@pytest.mark.parametrize("env_id", ["CartPole-v1", "MinAtar/Breakout-v1"])
def test_step_at_the_time_limit_resets_and_keeps_the_final_obs(env_id):
    limit = 3
    inner = jaxsim.make(env_id, max_episode_steps=limit)
    env = as_gymnax(inner)
    params = env.default_params
    _, state = env.reset(jax.random.key(5), params)
    for i in range(limit - 1):  # no episode ends this soon: the pole stands, the ball flies
        obs, state, reward, done, info = env.step(jax.random.key(10 + i), state, 0, params)
        assert not bool(done) and int(state.time) == i + 1
        np.testing.assert_array_equal(obs, info["final_obs"])

    key = jax.random.key(6)
    obs, new_state, reward, done, info = env.step(key, state, 1, params)
    assert bool(done) and bool(info["truncated"]) and not bool(info["terminated"])
    assert float(info["discount"]) == 1.0
    assert int(new_state.time) == 0
    key_step, key_reset = jax.random.split(key)
    expected_state, expected = inner.step(key_step, state, jnp.int32(1), params)
    np.testing.assert_array_equal(info["final_obs"], expected.obs)
    assert reward == expected.reward and reward.dtype == jnp.float32
    reset_obs, reset_state = env.reset(key_reset, params)
    np.testing.assert_array_equal(obs, reset_obs)
    assert _tree_equal(new_state, reset_state)
    # step_env does not reset: its obs and state are the step's.
    obs_env, state_env, reward_env, done_env, _ = env.step_env(key_step, state, 1, params)
    np.testing.assert_array_equal(obs_env, expected.obs)
    assert _tree_equal(state_env, expected_state) and bool(done_env) and reward_env == reward


def test_termination_sets_discount_zero_and_resets():
    env = as_gymnax("CartPole-v1")
    params = env.default_params
    _, state = env.reset(jax.random.key(7), params)
    for i in range(100):  # pushing one way topples the pole in a few dozen steps
        obs, state, reward, done, info = env.step(jax.random.key(100 + i), state, 1, params)
        if bool(done):
            break
    assert bool(info["terminated"]) and not bool(info["truncated"])
    assert float(info["discount"]) == 0.0 and int(state.time) == 0
    assert abs(float(info["final_obs"][2])) > params.theta_threshold_radians or (
        abs(float(info["final_obs"][0])) > params.x_threshold
    )
    assert abs(float(obs[2])) <= params.reset_bound  # the fresh episode's pole


# -- a PPO written against gymnax's interface only -------------------------------------------------
@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """A small PPO for tests."""

    num_envs: int = 16
    """Environments stepped in parallel (vmap over the gymnax interface)."""
    num_steps: int = 64
    """Steps per environment per update."""
    num_updates: int = 100
    """Updates in one `train` call (the outer scan's length)."""
    update_epochs: int = 4
    """Passes over each batch."""
    num_minibatches: int = 4
    """Minibatches per pass."""
    lr: float = 2.5e-3
    """Adam's learning rate, annealed linearly to zero."""
    gamma: float = 0.99
    """Discount."""
    gae_lambda: float = 0.95
    """GAE's lambda."""
    clip_eps: float = 0.2
    """PPO's ratio clip."""
    ent_coef: float = 0.01
    """Entropy bonus weight."""
    vf_coef: float = 0.5
    """Value loss weight."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    hidden: int = 64
    """Width of the two hidden layers of actor and critic."""

    @property
    def minibatch_size(self) -> int:
        return self.num_envs * self.num_steps // self.num_minibatches


class ActorCritic(nn.Module):
    """Separate tanh MLPs: obs [B, D] -> (logits [B, A], value [B])."""

    num_actions: int
    hidden: int

    @nn.compact
    def __call__(self, obs):
        def mlp(x, out, scale):
            for _ in range(2):
                x = nn.tanh(nn.Dense(self.hidden, kernel_init=nn.initializers.orthogonal(1.4))(x))
            return nn.Dense(out, kernel_init=nn.initializers.orthogonal(scale))(x)

        return mlp(obs, self.num_actions, 0.01), mlp(obs, 1, 1.0)[..., 0]


@struct.dataclass
class Transition:
    """One step of the batch: every field [B] (obs fields [B, D])."""

    obs: jax.Array
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    reward: jax.Array
    done: jax.Array
    discount: jax.Array  # 1 - terminated: truncation still bootstraps
    final_obs: jax.Array


@struct.dataclass
class RunnerState:
    """The training loop's carry."""

    params: dict
    opt_state: optax.OptState
    env_state: object
    obs: jax.Array
    episode_return: jax.Array  # [B], the running episodes' returns so far
    key: jax.Array


def flat(obs):
    """obs [B, *obs_shape] (float or bool) -> float32 [B, D]."""
    return obs.reshape(obs.shape[0], -1).astype(jnp.float32)


def gae(values, next_values, rewards, dones, discounts, gamma, lam):
    """Advantages and returns [T, B] from values [T, B], next_values [T, B] (the value of each
    step's true next obs, `final_obs`), rewards, dones and discounts [T, B]: bootstraps through
    truncation, cuts the trace at every episode end."""
    deltas = rewards + gamma * discounts * next_values - values

    def backward(advantage, t):
        delta, done = t
        advantage = delta + gamma * lam * (1.0 - done) * advantage
        return advantage, advantage

    _, advantages = jax.lax.scan(
        backward, jnp.zeros_like(values[0]), (deltas, dones.astype(jnp.float32)), reverse=True
    )
    return advantages, advantages + values


def ppo_loss(net_params, network, batch, advantages, targets, config):
    """Clipped PPO loss over a minibatch [N]."""
    logits, value = network.apply(net_params, flat(batch.obs))
    log_probs = jax.nn.log_softmax(logits)
    log_prob = jnp.take_along_axis(log_probs, batch.action[:, None], axis=-1)[:, 0]
    ratio = jnp.exp(log_prob - batch.log_prob)
    adv = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    clipped = jnp.clip(ratio, 1.0 - config.clip_eps, 1.0 + config.clip_eps)
    policy_loss = -jnp.minimum(ratio * adv, clipped * adv).mean()
    value_loss = 0.5 * ((value - targets) ** 2).mean()
    entropy = -(jnp.exp(log_probs) * log_probs).sum(-1).mean()
    return policy_loss + config.vf_coef * value_loss - config.ent_coef * entropy


def make_train(config: PPOConfig, env):
    """PPO over any gymnax-interface `env`: `train(key) -> per-update metrics` (jit it)."""
    env_params = env.default_params
    network = ActorCritic(env.action_space(env_params).n, config.hidden)
    schedule = optax.linear_schedule(
        config.lr, 0.0, config.num_updates * config.update_epochs * config.num_minibatches
    )
    tx = optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm), optax.adam(schedule, eps=1e-5)
    )
    v_reset = jax.vmap(env.reset, in_axes=(0, None))
    v_step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def env_step(runner: RunnerState, _):
        key, k_act, k_step = jax.random.split(runner.key, 3)
        logits, value = network.apply(runner.params, flat(runner.obs))
        action = jax.random.categorical(k_act, logits)
        log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], -1)[:, 0]
        obs, env_state, reward, done, info = v_step(
            jax.random.split(k_step, config.num_envs), runner.env_state, action, env_params
        )
        episode_return = runner.episode_return + reward
        finished = jnp.where(done, episode_return, 0.0)
        transition = Transition(
            runner.obs, action, log_prob, value, reward, done, info["discount"], info["final_obs"]
        )
        runner = runner.replace(
            env_state=env_state,
            obs=obs,
            episode_return=jnp.where(done, 0.0, episode_return),
            key=key,
        )
        return runner, (transition, finished)

    def update(runner: RunnerState, _):
        runner, (traj, finished) = jax.lax.scan(env_step, runner, None, config.num_steps)
        t, b = traj.reward.shape
        _, next_values = network.apply(runner.params, flat(traj.final_obs.reshape(t * b, -1)))
        advantages, targets = gae(
            traj.value,
            next_values.reshape(t, b),
            traj.reward,
            traj.done,
            traj.discount,
            config.gamma,
            config.gae_lambda,
        )
        data = jax.tree.map(lambda x: x.reshape(t * b, *x.shape[2:]), (traj, advantages, targets))

        def epoch(carry, key):
            params, opt_state = carry
            order = jax.random.permutation(key, t * b)
            minibatches = jax.tree.map(
                lambda x: x[order].reshape(
                    config.num_minibatches, config.minibatch_size, *x.shape[1:]
                ),
                data,
            )

            def minibatch(carry, mb):
                params, opt_state = carry
                batch, adv, tgt = mb
                grads = jax.grad(ppo_loss)(params, network, batch, adv, tgt, config)
                updates, opt_state = tx.update(grads, opt_state)
                return (optax.apply_updates(params, updates), opt_state), None

            return jax.lax.scan(minibatch, (params, opt_state), minibatches)[0], None

        key, k_epochs = jax.random.split(runner.key)
        epoch_keys = jax.random.split(k_epochs, config.update_epochs)
        (params, opt_state), _ = jax.lax.scan(epoch, (runner.params, runner.opt_state), epoch_keys)
        runner = runner.replace(params=params, opt_state=opt_state, key=key)
        num_done = traj.done.sum()
        metrics = {
            "mean_return": finished.sum() / jnp.maximum(num_done, 1),
            "episodes": num_done,
            "mean_reward": traj.reward.mean(),
        }
        return runner, metrics

    def train(key):
        k_init, k_reset, k_run = jax.random.split(key, 3)
        obs, env_state = v_reset(jax.random.split(k_reset, config.num_envs), env_params)
        params = network.init(k_init, flat(obs))
        runner = RunnerState(
            params, tx.init(params), env_state, obs, jnp.zeros(config.num_envs), k_run
        )
        return jax.lax.scan(update, runner, None, config.num_updates)[1]

    return train


def _episode_mean(metrics, last: int) -> float:
    """The mean return of the episodes that ended in the last `last` updates."""
    returns = np.asarray(metrics["mean_return"][-last:])
    episodes = np.asarray(metrics["episodes"][-last:])
    return float((returns * episodes).sum() / max(episodes.sum(), 1))


def test_ppo_learns_cartpole_through_the_view():
    env = as_gymnax("CartPole-v1")
    start = time.perf_counter()
    metrics = jax.block_until_ready(jax.jit(make_train(PPOConfig(), env))(jax.random.key(0)))
    elapsed = time.perf_counter() - start
    first = _episode_mean({k: v[:5] for k, v in metrics.items()}, 5)
    last = _episode_mean(metrics, 5)
    print(f"CartPole PPO: first updates {first:.1f}, last updates {last:.1f}, {elapsed:.1f} s")
    # The first update's policy is near uniform: a random policy's CartPole episodes last ~22
    # steps. Seeds 0-11 reached 436-500 (seed 0: 500) in the last 5 updates of 100.
    assert first < 40
    assert last > 250


def test_ppo_runs_on_minatar_breakout_with_sticky_actions():
    env = as_gymnax("MinAtar/Breakout-v1")
    assert float(env.default_params.sticky_action_prob) > 0
    config = PPOConfig(num_envs=8, num_steps=32, num_updates=3, update_epochs=1, hidden=32)
    metrics = jax.jit(make_train(config, env))(jax.random.key(1))
    for name, values in metrics.items():
        assert values.shape == (3,) and bool(jnp.isfinite(values).all()), name
