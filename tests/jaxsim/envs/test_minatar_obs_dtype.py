"""MinAtar's observation is the original's bool [10, 10, C] grid on every path, with the space
it declares: env.reset/step, rollouts (scan, `out=` reuse), the Gymnasium fronts and SB3, the
memory pre-flight, drawing, and `spaces.Box` of bool. The fused kernel's (interpret mode) bool
obs and next_obs are checked by test_minatar.py's scan-vs-fused test, whose kernels compile
anyway."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim
from jaxsim.envs.minatar import ENVS
from jaxsim.rollout.checks import _state_bytes, _step_bytes
from jaxsim.spaces import Box

KEY = jax.random.key(0)
GAME_IDS = [cls.id for cls in ENVS if cls.id.endswith("-v0")]


def _space_holds(env, obs) -> bool:
    space = env.observation_space(env.default_params)
    return bool(space.contains(obs))


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_reset_and_step_give_bool_grids_the_declared_space_contains(env_id):
    env = jaxsim.make(env_id)
    params = env.default_params
    space = env.observation_space(params)
    assert space == Box(0, 1, env.obs_shape, jnp.bool_) and space.dtype == jnp.bool_
    assert space.low.dtype == space.high.dtype == np.bool_
    state, obs = env.reset(KEY, params)
    assert obs.dtype == jnp.bool_ and obs.shape == env.obs_shape and _space_holds(env, obs)
    _, ts = env.step(jax.random.key(1), state, jnp.int32(1), params)
    assert ts.obs.dtype == jnp.bool_ and _space_holds(env, ts.obs)
    # The same cells as float32 are not in the space (Gymnasium's bool Box says the same).
    assert not _space_holds(env, ts.obs.astype(jnp.float32))
    assert not _space_holds(env, ts.obs[..., :-1])


# 40 steps of 12 environments, as test_minatar_si_seaquest.py's scan-vs-fused rollouts (their
# param overrides are arrays, not part of the program): SpaceInvaders' and Seaquest's costly
# rollout programs then compile once in a run, and load from its compilation cache the 2nd time.
STEPS, NUM_ENVS = 40, 12


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_scan_rollout_and_output_reuse_keep_bool(env_id):
    env = jaxsim.make(env_id)
    kw = dict(num_envs=NUM_ENVS, key=KEY)
    fresh = jaxsim.rollout(env, "random", STEPS, **kw)
    for obs in (fresh.obs, fresh.next_obs, fresh.final_state.obs):
        assert obs.dtype == jnp.bool_
    assert _space_holds(env, fresh.obs[3, 2]) and _space_holds(env, fresh.next_obs[-1, 0])
    expected = jax.tree.map(np.asarray, fresh)
    previous = jaxsim.rollout(env, "random", STEPS, num_envs=NUM_ENVS, key=jax.random.key(9))
    reused = jaxsim.rollout(env, "random", STEPS, out=previous, **kw)
    assert reused.obs.dtype == reused.next_obs.dtype == jnp.bool_
    for x, y in zip(jax.tree.leaves(expected), jax.tree.leaves(reused), strict=True):
        np.testing.assert_array_equal(np.asarray(y), x)
        assert np.asarray(y).dtype == x.dtype


def test_gymnasium_single_vector_and_sb3_give_the_declared_bool_space():
    gymnasium = pytest.importorskip("gymnasium")
    from gymnasium.vector import AutoresetMode

    import jaxsim.gymnasium as jg

    # The original's own Gymnasium env declares Box(0, 1, (10, 10, 4), bool): the same.
    pytest.importorskip("minatar")
    import minatar.gym

    if "MinAtar/Breakout-v0" not in gymnasium.registry:
        minatar.gym.register_envs()
    theirs = gymnasium.make("MinAtar/Breakout-v0").observation_space
    env = jg.make("MinAtar/Breakout-v0")
    assert env.observation_space == theirs and env.observation_space.dtype == np.bool_
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.bool_ and env.observation_space.contains(obs)
    obs, *_ = env.step(1)
    assert obs.dtype == np.bool_ and env.observation_space.contains(obs)
    env.close()

    venv = jg.make_vec("MinAtar/Breakout-v0", num_envs=4, autoreset_mode=AutoresetMode.SAME_STEP)
    assert venv.single_observation_space == theirs
    obs, _ = venv.reset(seed=0)
    assert obs.dtype == np.bool_ and venv.observation_space.contains(obs)
    finals = []
    for _ in range(400):
        obs, _, terminated, truncated, info = venv.step(np.ones(4, np.int64))
        assert obs.dtype == np.bool_ and venv.observation_space.contains(obs)
        if "final_obs" in info:
            finals += [f for f in info["final_obs"] if f is not None]
            break
    assert finals and all(f.dtype == np.bool_ and theirs.contains(f) for f in finals)
    venv.close()

    pytest.importorskip("stable_baselines3")
    from jaxsim.gymnasium.sb3 import JaxsimSB3VecEnv

    sb3 = JaxsimSB3VecEnv("MinAtar/Breakout-v0", num_envs=2)
    assert sb3.observation_space == theirs
    obs = sb3.reset()
    assert obs.dtype == np.bool_ and obs.shape == (2, 10, 10, 4)
    sb3.close()


def test_memory_preflight_counts_one_byte_a_cell():
    env = jaxsim.make("MinAtar/Freeway-v0")  # 7 channels: 700 cells
    steps = _step_bytes(env, 3)
    assert steps["obs"] == steps["next_obs"] == 3 * 700
    state = jax.eval_shape(env.init_state, env.reset_draw_shapes(), env.default_params)
    state_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(state))
    assert _state_bytes(env) == state_bytes + 700 + 8
    cartpole = jaxsim.make("CartPole-v1")  # float32 vectors: 4 bytes a component, as before
    assert _step_bytes(cartpole, 1)["obs"] == 16


def test_drawing_takes_the_bool_grid():
    env = jaxsim.make("MinAtar/Asterix-v0")
    state, obs = env.reset(KEY, env.default_params)
    image = env.draw_observation(np.asarray(obs), env.default_params)
    np.testing.assert_array_equal(
        image, env.draw_observation(np.asarray(obs, np.float32), env.default_params)
    )
    np.testing.assert_array_equal(image, env.draw(state, env.default_params))
    assert image.any()


def test_bool_box():
    grid = Box(0, 1, (10, 10, 4), jnp.bool_)
    assert repr(grid) == "Box(low=0.0, high=1.0, shape=(10, 10, 4), dtype=bool)"
    box = Box(0, 1, (3, 2), jnp.bool_)
    assert box != Box(0, 1, (3, 2)) and hash(box) == hash(Box(0.0, 1.0, (3, 2), np.bool_))
    sample = box.sample(KEY)
    assert sample.dtype == jnp.bool_ and bool(box.contains(sample))
    fixed = Box([[0, 1]] * 3, [[0, 1]] * 3, dtype=jnp.bool_)  # low == high: that value
    assert np.array_equal(fixed.sample(KEY), np.array([[False, True]] * 3))
    assert not bool(fixed.contains(jnp.ones((3, 2), jnp.bool_)))
    bits = jax.random.bits(KEY, (5, 3, 2), jnp.uint32)
    drawn = box.from_bits(bits, bits)
    assert drawn.dtype == jnp.bool_ and 0 < int(drawn.sum()) < drawn.size
    assert not bool(box.contains(jnp.zeros((3, 2), jnp.int32)))
    with pytest.raises(ValueError, match="Box: dtype must be float32 or bool, got int8"):
        Box(0, 1, (2,), np.int8)
    with pytest.raises(ValueError, match="Box: a bool Box has bounds 0 or 1"):
        Box(0, 2, (2,), jnp.bool_)
