"""PPO and DQN presets for the native MinAtar games: every id resolves; PPO updates run on one."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxsim
from agents import presets
from agents.algorithms import agent_type
from jaxsim.envs.minatar import ENVS

IDS = sorted(cls.id for cls in ENVS)


def test_every_minatar_id_has_a_preset_and_a_time_limit_for_evaluation():
    assert sorted(presets.MINATAR_IDS) == IDS
    for env_id in IDS:
        env = jaxsim.make(env_id, **presets.env_overrides_for(env_id))
        # Evaluation runs max_episode_steps steps: the original's "none" would never end.
        assert env.default_params.max_episode_steps <= 10_000, env_id
        for algorithm in ("ppo", "dqn"):
            config = presets.config_for(env_id, algorithm)
            assert config == presets.config_for(env_id, algorithm, **{}), env_id
            assert config.total_steps == presets.PRESETS[algorithm][env_id]["total_steps"]
    # The original's sticky actions and ramping stay on in the agents' runs.
    params = jaxsim.make("MinAtar/Breakout-v1", **presets.env_overrides_for("MinAtar/Breakout-v1"))
    assert float(params.default_params.sticky_action_prob) == pytest.approx(0.1)
    assert bool(params.default_params.difficulty_ramping)


def test_a_few_ppo_updates_and_an_evaluation_run_on_minatar():
    env_id = "MinAtar/SpaceInvaders-v1"
    env = jaxsim.make(env_id, max_episode_steps=50)  # a short evaluation
    config = presets.config_for(
        env_id,
        "ppo",
        total_steps=3 * 4 * 8,
        num_envs=4,
        num_steps=8,
        num_minibatches=2,
        update_epochs=1,
        hidden=(8,),
        eval_envs=2,
    )
    agent = agent_type("ppo")(config, env)
    runner = agent.jit_init()(jax.random.split(jax.random.key(0), 2))
    runner, metrics = agent.jit_run(3)(runner)
    assert np.asarray(metrics.update).tolist() == [[1, 2, 3], [1, 2, 3]]
    assert np.isfinite(np.asarray(jax.tree.leaves(metrics.loss))).all()
    returns = agent.jit_evaluate()(runner, jax.random.split(jax.random.key(1), 2))
    assert returns.shape == (2, 2) and np.isfinite(np.asarray(returns)).all()
