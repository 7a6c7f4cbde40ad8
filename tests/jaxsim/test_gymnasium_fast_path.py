"""The host fronts' packed programs give what the unpacked jnp step gives, step after step."""

from __future__ import annotations

import jax
import numpy as np
import pytest

pytest.importorskip("gymnasium")

import gymnasium as gym

import jaxsim.gymnasium
from jaxsim.gymnasium import programs as gymnasium_programs

GAME = "MinAtar/Breakout-v0"


def _equal_trees(a, b) -> bool:
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(la) == len(lb) and all(
        np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb, strict=True)
    )


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_vector_step_equals_the_unpacked_step_through_auto_resets(mode):
    num_envs, steps = 3, 200
    venv = jaxsim.gymnasium.make_vec(GAME, num_envs=num_envs, autoreset_mode=mode).unwrapped
    same_step = mode == "SameStep"
    _, reference_step = gymnasium_programs.reference(venv.jax_env, num_envs, same_step)
    venv.reset(seed=3)
    rng = np.random.default_rng(0)
    ended = 0
    for t in range(steps):
        actions = rng.integers(0, 6, num_envs)
        moving, fixed = venv._moving, venv._fixed
        want_moving, (obs, reward, terminated, truncated, final_obs) = reference_step(
            moving, fixed, np.asarray(actions, np.int32)
        )
        got = venv.step(actions)
        assert got[0].dtype == np.bool_ and got[0].shape == (num_envs, 10, 10, 4)
        assert got[1].dtype == np.float32 and got[2].dtype == got[3].dtype == np.bool_
        for name, g, w in zip(
            ("obs", "reward", "terminated", "truncated"),
            got[:4],
            (obs, reward, terminated, truncated),
            strict=True,
        ):
            assert np.array_equal(g, np.asarray(w)), f"step {t}: {name} differs"
        assert _equal_trees(venv._moving, want_moving), f"step {t}: the state differs"
        done = got[2] | got[3]
        ended += int(done.sum())
        if same_step and done.any():
            info = got[4]
            assert np.array_equal(info["_final_obs"], done)
            for i in np.flatnonzero(done):
                assert np.array_equal(info["final_obs"][i], np.asarray(final_obs)[i])
    assert ended >= 3, f"only {ended} episodes ended: the auto-reset was not exercised"


def test_single_env_step_equals_env_step_through_resets():
    env = gym.make("jaxsim/MinAtar-Breakout-v0")
    inner = env.unwrapped
    jax_env, params = inner.jax_env, inner.params
    programs = inner._programs
    split_key = bool(jax_env.draws.step_key or jax_env.step_uniform_shapes())
    reference = jax.jit(jax_env.step)
    env.reset(seed=5)
    rng = np.random.default_rng(1)
    resets = 0
    for t in range(300):
        action = int(rng.integers(0, 6))
        _, key, state, _ = programs.unpack(inner._words)
        step_key = jax.random.split(key)[1] if split_key else key
        _, ts = reference(step_key, state, np.int32(action), params)
        obs, reward, terminated, truncated, _ = env.step(action)
        assert obs.dtype == np.bool_ and np.array_equal(obs, np.asarray(ts.obs)), f"step {t}"
        assert reward == float(ts.reward) and terminated == bool(ts.terminated), f"step {t}"
        assert truncated == bool(ts.truncated), f"step {t}"
        if terminated or truncated:
            env.reset()
            resets += 1
    assert resets >= 2, f"only {resets} episodes ended: resets were not exercised"
