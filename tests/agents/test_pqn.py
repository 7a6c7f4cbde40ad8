"""PQN (agents/pqn.py): Q(lambda) returns against a Python loop, bad input, learning on
CartPole-v1, the named phases, the command."""

from __future__ import annotations

import dataclasses
import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_agent_config import _outside

import jaxsim
from agents import checkpoint, presets, train
from agents.config import AgentConfig, declared_specs
from agents.pqn import PQN, PQNConfig, QPolicy, q_lambda_returns


# ----------------------------------------------------------------------------- lambda-returns
def _loop_returns(reward, next_q, terminated, truncated, gamma, lam):
    """Peng's Q(lambda) return written out step by step, per environment, backwards."""
    steps, envs = reward.shape
    out = np.zeros((steps, envs))
    for b in range(envs):
        for t in reversed(range(steps)):
            if terminated[t, b]:  # no future
                out[t, b] = reward[t, b]
            elif truncated[t, b] or t == steps - 1:  # the next step is another episode's, or none
                out[t, b] = reward[t, b] + gamma * next_q[t, b]
            else:
                mix = (1 - lam) * next_q[t, b] + lam * out[t + 1, b]
                out[t, b] = reward[t, b] + gamma * mix
    return out


@pytest.mark.parametrize("lam", [0.0, 0.65, 1.0])
def test_lambda_returns_match_a_python_loop(lam):
    # 6 steps of 3 environments: env 0 terminates at 2 and is truncated at 4; env 1 is truncated
    # at 1 and terminates at the last step; env 2 runs through.
    reward = np.array(
        [[1.0, 0.5, -1.0], [0.0, 2.0, 0.5], [3.0, 1.0, 1.0], [1.0, -0.5, 0.0],
         [0.5, 1.0, 2.0], [2.0, 0.0, 1.5]]
    )  # fmt: skip
    next_q = np.array(
        [[4.0, 1.0, 2.0], [3.0, 7.0, -1.0], [9.0, 2.0, 0.5], [1.5, 0.5, 3.0],
         [6.0, 2.5, 1.0], [2.0, 8.0, 4.0]]
    )  # fmt: skip
    terminated = np.zeros((6, 3), bool)
    truncated = np.zeros((6, 3), bool)
    terminated[2, 0] = truncated[4, 0] = True
    truncated[1, 1] = terminated[5, 1] = True
    got = q_lambda_returns(
        jnp.asarray(reward, jnp.float32),
        jnp.asarray(next_q, jnp.float32),
        jnp.asarray(terminated),
        jnp.asarray(truncated),
        0.9,
        lam,
    )
    want = _loop_returns(reward, next_q, terminated, truncated, 0.9, lam)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    # By hand, two entries: a terminal step is its reward; a truncated one bootstraps fully.
    assert want[2, 0] == 3.0 and want[4, 0] == pytest.approx(0.5 + 0.9 * 6.0)


# ---------------------------------------------------------------------------------- bad input
def test_a_box_action_space_is_refused_by_name():
    with pytest.raises(ValueError, match=r"PQN: Pendulum-v1 has action space Box"):
        PQN(PQNConfig(total_steps=4096), jaxsim.make("Pendulum-v1"))


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--env", "Pendulum-v1"], "PQN: Pendulum-v1 has action space Box"),
        (["--num-minibatches", "3"], "num_minibatches=3 does not divide"),
        (["--optimizer", "sgd"], "optimizer must be one of ['radam', 'adam']"),
        (["--q-lambda", "1.5"], "q_lambda must be a float >= 0 and <= 1, got 1.5"),
    ],
)
def test_command_rejects_bad_input_before_compiling(capsys, tmp_path, flags, message):
    with pytest.raises(SystemExit) as exit_info:
        train.main(["pqn", "--out", str(tmp_path), *flags])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_every_declared_range_is_enforced_and_the_common_fields_come_first():
    common = [f.name for f in dataclasses.fields(AgentConfig)]
    assert [f.name for f in dataclasses.fields(PQNConfig)][: len(common)] == common
    checked = 0
    for name, spec in declared_specs(PQNConfig).items():
        bad = spec.kind.__name__ if spec.kind is str else _outside(spec)
        if bad is None:
            continue
        with pytest.raises(ValueError, match=rf"^PQNConfig: {name} must be "):
            PQNConfig(**{name: bad})
        checked += 1
    assert checked >= 12
    assert PQNConfig.from_dict(json.loads(json.dumps(PQNConfig().to_dict()))) == PQNConfig()


def test_epsilon_falls_linearly_then_stays():
    config = PQNConfig(total_steps=1000 * 32 * 64, exploration_fraction=0.25, end_e=0.1)
    agent = PQN(config, jaxsim.make("CartPole-v1"))
    runner = jax.eval_shape(agent.init, jax.random.key(0))
    at = [0, 125, 250, 600]
    eps = [float(agent.epsilon(runner.replace(update=jnp.int32(u)))) for u in at]
    np.testing.assert_allclose(eps, [1.0, 0.55, 0.1, 0.1], rtol=1e-6)
    assert float(agent.policy(runner, deterministic=True).epsilon) == 0.0


# ----------------------------------------------------------------------------------- learning
# 40 updates of 16 envs x 32 steps. Measured (2 seeds, keys of jax.random.key(0)): untrained
# greedy evaluation 22.5 and 12.1, trained 113.9 and 113.8.
LEARN = PQNConfig(
    total_steps=40 * 16 * 32,
    num_envs=16,
    num_steps=32,
    num_minibatches=4,
    update_epochs=2,
    hidden=(64, 64),
    learning_rate=1e-3,
    anneal_lr=False,
    end_e=0.05,
    exploration_fraction=0.5,
    eval_envs=32,
)


def test_learns_cartpole():
    agent = PQN(LEARN, jaxsim.make("CartPole-v1"))
    keys = jax.random.split(jax.random.key(0), 2)
    runner = agent.jit_init()(keys)
    evaluate = agent.jit_evaluate()
    before = np.asarray(evaluate(runner, keys)).mean()
    final, metrics = agent.jit_run(LEARN.num_updates)(runner)
    after = np.asarray(evaluate(final, keys)).mean(axis=1)
    assert before < 30, before
    assert (after >= 70).all(), (before, after)
    assert np.isfinite(np.asarray(jax.tree.leaves(metrics.loss))).all()
    np.testing.assert_allclose(np.asarray(metrics.loss.epsilon)[:, -1], 0.05, rtol=1e-6)


def test_phases_are_named_scopes():
    config = PQNConfig(total_steps=64, num_envs=4, num_steps=16, num_minibatches=2, hidden=(8,))
    agent = PQN(config, jaxsim.make("CartPole-v1"))
    runner = jax.eval_shape(agent.init, jax.random.key(0))  # lowering needs shapes only
    text = jax.jit(agent.update).lower(runner).as_text(debug_info=True)
    names = {part for loc in re.findall(r'loc\("([^"]*)"', text) for part in loc.split("/")}
    for phase in ("rollout", "lambda_returns", "shuffle", "loss", "backward", "optimizer"):
        assert phase in names, phase


def test_every_minatar_game_has_a_preset_and_an_update_runs_on_its_bool_grid():
    assert set(presets.MINATAR_IDS) <= set(presets.PRESETS["pqn"])
    env_id = "MinAtar/Breakout-v1"
    env = jaxsim.make(env_id, **presets.env_overrides_for(env_id))
    assert env.observation_space(env.default_params).dtype == jnp.bool_
    config = presets.config_for(
        env_id, "pqn", total_steps=2 * 4 * 8, num_envs=4, num_steps=8, num_minibatches=2,
        hidden=(8,),
    )  # fmt: skip
    agent = PQN(config, env)
    runner, metrics = jax.jit(lambda key: agent.update(agent.init(key)))(jax.random.key(0))
    assert int(runner.update) == 1
    assert np.isfinite(np.asarray(jax.tree.leaves(metrics.loss))).all()


# ------------------------------------------------------------------------------------ command
def test_command_writes_eval_json(tmp_path, capsys):
    # In this process (train.main is what `python -m agents.train` runs; tests/test_guide.py
    # runs that): a subprocess would pay JAX's import again.
    out = tmp_path / "run"
    flags = ["--total-steps", "1024", "--num-envs", "4", "--num-steps", "16",
             "--num-minibatches", "2", "--update-epochs", "1", "--hidden", "16",
             "--eval-envs", "4", "--log-every", "8", "--seeds", "2", "--no-plot",
             "--target-return", "none"]  # fmt: skip
    train.main(["pqn", "--env", "CartPole-v1", *flags, "--out", str(out)])
    assert "[pqn CartPole-v1] update 16/16" in capsys.readouterr().out
    evaluation = json.loads((out / "eval.json").read_text())
    assert evaluation["steps_per_seed"] == 1024
    assert len(evaluation["per_seed_mean_return"]) == 2
    header = (out / "metrics.csv").read_text().splitlines()[0]
    assert header.endswith("episodes,q_loss,q_value,epsilon")
    env, policy = checkpoint.load_policy(str(out / "checkpoint.msgpack"), seed=1)
    assert isinstance(policy, QPolicy) and float(policy.epsilon) == 0.0
