"""PPO's conv actor-critic (`network="cnn"`): the conv against XLA's, shapes, learning, errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

import jaxsim
from agents.networks import CNNPolicy, cnn_features, make_actor_critic, to_policy
from agents.ppo import PPO, PPOConfig, make_train


@struct.dataclass
class GridParams:
    max_episode_steps: int = 10


@struct.dataclass
class GridState:
    side: jax.Array
    time: jax.Array


class GridBandit(jaxsim.Env):
    """One step: a bool [5, 6, 2] grid with one lit cell in channel 0 (left half) or channel 1
    (right half); reward 1 for action 1 on the right, action 0 on the left, else 0."""

    id = "GridBandit-v0"
    params_type = GridParams
    state_type = GridState
    draws = jaxsim.Draws(reset=1)
    obs_shape = (5, 6, 2)  # the grid is its one observation component

    def init_state(self, u, params):
        return GridState(u[0] < 0.5, jnp.zeros(jnp.shape(u[0]), jnp.int32))

    def dynamics(self, s, action, p):
        right = (action == 1) == s.side
        return s, jnp.where(right, 1.0, 0.0), jnp.ones_like(right)

    def obs_fields(self, s, p):
        grid = jnp.zeros((5, 6, 2), bool)
        lit = grid.at[2, 4, 1].set(True)
        return (jnp.where(s.side, lit, grid.at[2, 1, 0].set(True)),)

    def observation_space(self, p):
        return jaxsim.Box(0.0, 1.0, (5, 6, 2))

    def action_space(self, p):
        return jaxsim.Discrete(3)


def _params(env, hidden=(32,), channels=4, seed=0):
    return make_actor_critic(env, hidden=hidden, network="cnn", conv_channels=channels)(
        jax.random.key(seed)
    )


def test_conv_features_equal_xla_convolution():
    params = _params(GridBandit(), hidden=(8, 8), channels=5)
    obs = jax.random.bernoulli(jax.random.key(1), 0.3, (7, 5, 6, 2))
    kernel, bias = params["conv"]
    conv = jax.lax.conv_general_dilated(
        obs.astype(jnp.float32),
        kernel,
        (1, 1),
        "VALID",
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
        precision=jax.lax.Precision.HIGHEST,
    )
    h = jax.nn.relu(conv + bias).reshape(7, -1)
    for w, b in params["torso"]:
        h = jax.nn.relu(h @ w + b)
    got = cnn_features(params["conv"], params["torso"], obs)
    assert got.shape == (7, 8)
    np.testing.assert_allclose(got, h, rtol=1e-5, atol=1e-5)


def test_shapes_of_params_actions_and_evaluation():
    env = GridBandit()
    params = _params(env, hidden=(32,), channels=4)
    assert params["conv"][0].shape == (3, 3, 2, 4)
    assert params["torso"][0][0].shape == (3 * 4 * 4, 32)
    assert params["actor"][0][0].shape == (32, 3) and params["critic"][0][0].shape == (32, 1)
    policy = to_policy(params)
    assert isinstance(policy, CNNPolicy)
    obs = jnp.zeros((6, 5, 6, 2), bool)
    action, extras = policy(jax.random.key(0), obs)
    assert action.shape == (6,) and action.dtype == jnp.int32
    assert extras["log_prob"].shape == (6,) and extras["value"].shape == (6,)
    # Any batch axes: [T, B] as the loss sees a trajectory.
    log_prob, entropy, value = policy.evaluate(jnp.zeros((4, 6, 5, 6, 2)), jnp.zeros((4, 6)))
    assert log_prob.shape == entropy.shape == value.shape == (4, 6)
    # The actor head starts near uniform (gain 0.01): entropy close to log 3.
    assert np.all(np.abs(np.asarray(entropy) - np.log(3)) < 1e-2)
    det = to_policy(params, deterministic=True)
    a1, _ = det(jax.random.key(1), obs)
    a2, _ = det(jax.random.key(2), obs)
    np.testing.assert_array_equal(a1, a2)


def test_cnn_ppo_learns_image_bandit_in_one_jit():
    env = GridBandit()
    config = PPOConfig(
        total_steps=16 * 8 * 40,
        num_envs=16,
        num_steps=8,
        update_epochs=2,
        num_minibatches=2,
        learning_rate=3e-3,
        network="cnn",
        conv_channels=4,
        hidden=(16,),
        log_every=40,
    )
    runner, metrics = jax.jit(make_train(config, env))(jax.random.key(0))
    assert metrics.mean_return.shape == (40,)
    agent = PPO(config, env)
    returns = agent.evaluate(runner, jax.random.key(3))
    assert float(jnp.mean(returns)) == 1.0  # always the rewarded action
    assert float(metrics.mean_return[0]) < 0.6  # it was not so at the start


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(network="conv"), "network"),
        (dict(network="cnn", normalize_obs=True), "normalize_obs"),
        (dict(network="cnn", conv_channels=0), "conv_channels"),
        (dict(network="cnn", rollout_backend="fused"), "scan backend only"),
    ],
)
def test_invalid_cnn_config_is_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PPOConfig(**kwargs)


def test_cnn_refuses_flat_observations():
    with pytest.raises(ValueError, match=r"CartPole-v1.*|\[H, W, C\]"):
        PPO(PPOConfig(network="cnn"), jaxsim.make("CartPole-v1"))


def test_the_command_refuses_cnn_on_the_fused_backend_up_front(capsys, tmp_path):
    from agents import train

    argv = ["ppo", "--env", "MinAtar/Breakout-v0", "--network", "cnn", "--out", str(tmp_path)]
    with pytest.raises(SystemExit) as info:
        train.main([*argv, "--rollout-backend", "fused", "--quiet"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "Traceback" not in err
    assert "network='cnn' runs on the scan backend only" in err
    assert not (tmp_path / "checkpoint.msgpack").exists()
