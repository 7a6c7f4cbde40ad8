"""Domain randomisation reaches the agents: per-environment params and a per-episode params
sampler in training, evaluation on its own params, and the train command's `--param` flag."""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest

import jaxsim
from agents import checkpoint, train
from agents.dqn import DQN, DQNConfig
from agents.ppo import PPO, PPOConfig, make_train
from agents.sac import SAC, SACConfig

TINY_PPO = PPOConfig(
    total_steps=128,
    num_envs=4,
    num_steps=32,
    num_minibatches=2,
    update_epochs=1,
    hidden=(8,),
    eval_envs=2,
    log_every=1,
    rollout_backend="scan",
)
TINY_ARGS = [
    "ppo", "--env", "CartPole-v1", "--seeds", "1", "--total-steps", "64", "--num-envs", "2",
    "--num-steps", "32", "--num-minibatches", "1", "--update-epochs", "1", "--hidden", "8",
    "--eval-envs", "2", "--log-every", "1", "--target-return", "none", "--no-plot", "--quiet",
]  # fmt: skip


@pytest.fixture(scope="module")
def cartpole():
    return jaxsim.make("CartPole-v1")


@pytest.fixture(scope="module")
def masspole(cartpole):
    return jaxsim.uniform_params(cartpole, masspole=(0.05, 0.5))


def test_ppo_trains_on_per_environment_params_and_evaluates_on_the_defaults(cartpole, masspole):
    params = masspole.sample(jax.random.key(0), TINY_PPO.num_envs, cartpole.default_params)
    agent = PPO(TINY_PPO, cartpole, env_params=params)
    runner, metrics = agent.jit_run(1, vmapped=False)(agent.init(jax.random.key(1)))
    assert int(runner.update) == 1 and np.isfinite(np.asarray(metrics.loss.total)).all()
    # The evaluation batch (eval_envs=2) never meets the per-environment params (num_envs=4):
    # it runs on the environment's defaults, as an agent trained without them evaluates.
    returns = agent.evaluate(runner, jax.random.key(2))
    plain = PPO(TINY_PPO, cartpole).evaluate(runner, jax.random.key(2))
    assert returns.shape == (TINY_PPO.eval_envs,)
    np.testing.assert_array_equal(returns, plain)


def test_evaluation_runs_on_its_own_params_when_given(cartpole, masspole):
    eval_params = cartpole.default_params.replace(masspole=np.full(2, 0.3, np.float32))
    agent = PPO(TINY_PPO, cartpole, eval_params=eval_params, eval_params_sampler=masspole)
    traj = agent.evaluation_rollout("random", jax.random.key(0), outputs="rewards")
    assert agent.eval_steps == 500 and traj.reward.shape == (500, TINY_PPO.eval_envs)
    drawn = traj.final_state.episode_params["masspole"]
    assert drawn.shape == (2,) and np.all((drawn >= 0.05) & (drawn < 0.5))
    # A time limit the sampler draws bounds the evaluation rollout by its upper end.
    steps = jaxsim.uniform_params(cartpole, max_episode_steps=(20, 40))
    assert PPO(TINY_PPO, cartpole, eval_params_sampler=steps).eval_steps == 40


def test_make_train_draws_every_episode_from_the_sampler(cartpole, masspole):
    config = dataclasses.replace(TINY_PPO, total_steps=2 * TINY_PPO.steps_per_update)
    runner, metrics = jax.jit(make_train(config, cartpole, params_sampler=masspole))(
        jax.random.key(0)
    )
    assert metrics.update.tolist() == [1, 2]
    drawn = np.asarray(runner.env_state.episode_params["masspole"])
    assert drawn.shape == (config.num_envs,) and np.all((drawn >= 0.05) & (drawn < 0.5))


@pytest.mark.parametrize(
    "agent_cls, config, env_id, field",
    [
        (DQN, DQNConfig(total_steps=256, num_envs=4, learning_starts=0), "CartPole-v1", "gravity"),
        (SAC, SACConfig(total_steps=256, num_envs=4, learning_starts=0), "Pendulum-v1", "g"),
    ],
)
def test_off_policy_agents_take_per_environment_params_and_a_sampler(
    agent_cls, config, env_id, field
):
    env = jaxsim.make(env_id)
    gravity = jaxsim.uniform_params(env, **{field: (9.0, 10.5)})
    params = gravity.sample(jax.random.key(0), config.num_envs, env.default_params)
    agent = agent_cls(config, env, env_params=params, params_sampler=gravity)
    # Traced, not compiled: the update's rollout accepts both, and the state carries the draws.
    runner = jax.eval_shape(agent.init, jax.random.key(0))
    runner, _ = jax.eval_shape(agent.update, runner)
    assert runner.env_state.episode_params[field].shape == (config.num_envs,)


def test_a_params_batch_of_the_wrong_size_is_refused_naming_the_field(cartpole, masspole):
    three = masspole.sample(jax.random.key(0), 3, cartpole.default_params)
    with pytest.raises(ValueError, match=r"PPO env_params: .*'masspole' has shape \(3,\).*\(4,\)"):
        PPO(TINY_PPO, cartpole, env_params=three)
    with pytest.raises(ValueError, match=r"PPO eval_params: .*'masspole' has shape \(3,\).*\(2,\)"):
        PPO(TINY_PPO, cartpole, eval_params=three)
    with pytest.raises(TypeError, match=r"PPO env_params: must be CartPoleParams"):
        PPO(TINY_PPO, cartpole, env_params=jaxsim.make("Pendulum-v1").default_params)
    with pytest.raises(TypeError, match=r"PPO params_sampler: params_sampler must have"):
        PPO(TINY_PPO, cartpole, params_sampler=object())


@pytest.fixture(scope="module")
def randomised_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    argv = [*TINY_ARGS, "--param", "masspole=0.05:0.5", "--param", "gravity=9.0"]
    summary = train.main([*argv, "--out", str(out)])
    return out, argv, summary


def test_the_train_command_randomises_params_and_records_them(randomised_run):
    out, _, summary = randomised_run
    assert np.isfinite(summary["eval"]["mean_return"])
    saved = json.loads((out / "config.json").read_text())
    assert saved["env_overrides"] == {"gravity": 9.0}
    assert saved["uniform_params"] == {"masspole": [0.05, 0.5]}
    ckpt = checkpoint.load_checkpoint(str(out / "checkpoint.msgpack"))
    assert ckpt.env.default_params.gravity == 9.0
    assert ckpt.runner.env_state.episode_params["masspole"].shape == (1, 2)  # [seeds, num_envs]


@pytest.mark.parametrize(
    "changed, message",
    [
        (["--param", "masspole=0.05:0.4"], "with the --param ranges masspole=0.05:0.5, not "),
        ([], "with the --param ranges masspole=0.05:0.5, not (none)"),
    ],
)
def test_resume_needs_the_same_param_ranges(capsys, randomised_run, changed, message):
    out, argv, _ = randomised_run
    argv = [*argv[: len(TINY_ARGS)], "--param", "gravity=9.0", *changed]
    with pytest.raises(SystemExit) as info:
        train.main([*argv, "--out", str(out), "--resume"])
    assert info.value.code == 2 and message in capsys.readouterr().err


def test_resume_needs_the_same_fixed_params(capsys, randomised_run):
    out, argv, _ = randomised_run
    with pytest.raises(SystemExit) as info:
        train.main([*argv[:-1], "gravity=9.5", "--out", str(out), "--resume"])
    assert info.value.code == 2 and "gravity: 9.0 -> 9.5" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flag, message",
    [
        ("wind=1.0", "--param wind=1.0: CartPole-v1: unknown argument(s) ['wind']"),
        ("wind=0:1", "--param wind=0:1: uniform_params(CartPole-v1): unknown params field 'wind'"),
        ("masspole=-1:0.5", "--param masspole=-1:0.5: uniform_params(CartPole-v1): masspole must"),
        ("masspole=0.5:0.1", "--param masspole=0.5:0.1: uniform_params(CartPole-v1): masspole "),
        ("max_episode_steps=0", "--param max_episode_steps=0: CartPole-v1: max_episode_steps"),
        ("gravity=heavy", "argument --param: 'gravity=heavy': 'heavy' is not a number"),
        ("gravity", "argument --param: expected NAME=VALUE or NAME=LOW:HIGH"),
    ],
)
def test_a_bad_param_exits_2_naming_the_flag(capsys, tmp_path, flag, message):
    with pytest.raises(SystemExit) as info:
        train.main([*TINY_ARGS, "--param", flag, "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and message in err and "Traceback" not in err


def test_a_param_given_twice_is_refused(capsys, tmp_path):
    flags = ["--param", "masspole=0.05:0.5", "--param", "masspole=0.2"]
    with pytest.raises(SystemExit) as info:
        train.main([*TINY_ARGS, *flags, "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert "--param masspole=0.2: masspole is given twice (--param masspole=0.05:0.5)" in err
