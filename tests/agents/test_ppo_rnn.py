"""Recurrent PPO (agents/ppo_rnn.py): the GRU re-run matches the acting policy, training runs."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim
from agents import checkpoint, train
from agents.ppo_rnn import PPORNN, PPORNNConfig, RecurrentPolicy, episode_starts, run_sequence

TINY = dict(
    total_steps=4 * 16 * 2,
    num_envs=4,
    num_steps=16,
    num_minibatches=2,
    update_epochs=2,
    hidden=(16, 16),
    gru_size=8,
    eval_envs=4,
)


def test_sequence_rerun_sees_what_the_rollout_policy_saw():
    # Short episodes: the carry is reset inside the rollout, and the re-run must reset it alike.
    env = jaxsim.make("CartPole-NoVel-v1", max_episode_steps=6)
    agent = PPORNN(PPORNNConfig(**TINY), env)
    runner = agent.init(jax.random.key(0))
    assert runner.env_state.policy_carry.shape == (4, 8)
    traj = agent.rollout(agent.policy(runner), jax.random.key(1), runner.env_state)
    assert traj.done[:-1].any()
    reset = episode_starts(traj.done)
    carries, logits, value = run_sequence(
        agent.network, runner.params, traj.policy_carry, traj.obs, reset
    )
    log_p = jax.nn.log_softmax(logits)
    log_prob = jnp.take_along_axis(log_p, traj.action[..., None], -1)[..., 0]
    np.testing.assert_allclose(log_prob, traj.extras["log_prob"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(value, traj.extras["value"], rtol=1e-5, atol=1e-5)
    # Without the resets the re-run differs: they matter.
    _, _, unreset = run_sequence(
        agent.network, runner.params, traj.policy_carry, traj.obs, jnp.zeros_like(reset)
    )
    assert not np.allclose(unreset, traj.extras["value"], atol=1e-5)
    # The final carry is the last step's, zeroed where the last step ended an episode.
    expected = jnp.where(traj.done[-1][:, None], 0.0, carries[-1])
    np.testing.assert_allclose(traj.final_state.policy_carry, expected, rtol=1e-5, atol=1e-6)


def test_two_updates_of_two_seeds_train_without_nan():
    agent = PPORNN(PPORNNConfig(**TINY), jaxsim.make("CartPole-NoVel-v1"))
    runner = agent.jit_init()(jax.random.split(jax.random.key(0), 2))
    runner, metrics = agent.jit_run(2)(runner)
    assert metrics.loss.total.shape == (2, 2)
    assert np.isfinite(np.asarray(metrics.loss.total)).all()
    assert np.asarray(runner.update).tolist() == [2, 2]
    assert runner.env_state.policy_carry.shape == (2, 4, 8)
    returns = agent.jit_evaluate()(runner, jax.random.split(jax.random.key(1), 2))
    assert returns.shape == (2, 4) and np.all(np.asarray(returns) >= 1)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(num_minibatches=3), "num_minibatches=3 must divide num_envs=4"),
        (dict(rollout_backend="fused"), "rollout_backend='fused' cannot run a recurrent"),
        (dict(normalize_obs=True), "normalize_obs is not supported"),
    ],
)
def test_config_refuses_what_it_cannot_run(overrides, message):
    with pytest.raises(ValueError, match=message):
        PPORNNConfig(**{**TINY, **overrides})


def test_policy_acts_statelessly_from_a_fresh_carry_when_given_none():
    agent = PPORNN(PPORNNConfig(**TINY), jaxsim.make("CartPole-NoVel-v1"))
    policy = agent.policy(agent.init(jax.random.key(0)), deterministic=True)
    assert isinstance(policy, RecurrentPolicy)
    obs = jnp.ones((3, 2))
    action, extras = policy(jax.random.key(1), obs)
    again, _, carry = policy(jax.random.key(1), obs, policy.init_carry(3))
    np.testing.assert_array_equal(action, again)
    assert carry.shape == (3, 8) and extras["value"].shape == (3,)


def test_command_trains_evaluates_and_checkpoints(tmp_path):
    out = tmp_path / "run"
    # TINY's sizes, learning rate and seeds: the command's programs are the ones the test above
    # compiled (loaded from the suite's compilation cache), not three more compiles.
    flags = ["--seeds", "2", "--total-steps", "128", "--num-envs", "4", "--num-steps", "16",
             "--num-minibatches", "2", "--update-epochs", "2", "--hidden", "16,16",
             "--gru-size", "8", "--eval-envs", "4", "--learning-rate", "2.5e-4",
             "--log-every", "4", "--no-plot", "--target-return", "none", "--quiet"]  # fmt: skip
    summary = train.main(["ppo_rnn", "--env", "CartPole-NoVel-v1", *flags, "--out", str(out)])
    assert summary is not None
    evaluation = json.loads((out / "eval.json").read_text())
    assert evaluation["steps_per_seed"] == 128
    ckpt = checkpoint.load_checkpoint(str(out / "checkpoint.msgpack"))
    assert ckpt.meta["algorithm"] == "ppo_rnn" and ckpt.env.id == "CartPole-NoVel-v1"
    assert isinstance(ckpt.config, PPORNNConfig) and ckpt.config.gru_size == 8
