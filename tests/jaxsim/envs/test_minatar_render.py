"""MinAtar draws itself through `Env.draw`: env.render, render_gif and Gymnasium's rgb_array."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxsim
from jaxsim.envs.minatar import ENVS
from jaxsim.envs.minatar.base import CELL, draw_grid

pytest.importorskip("PIL", reason="needs the render extra")
from PIL import Image

KEY = jax.random.key(0)


@pytest.mark.parametrize("env_id", sorted(cls.id for cls in ENVS))
def test_every_game_renders_its_observation(env_id):
    env = jaxsim.make(env_id)
    assert env.renderable and env.draws_observations and env.render_fps == 20
    state, obs = env.reset(KEY, env.default_params)
    image = env.render(state)
    assert image.shape == (10 * CELL, 10 * CELL, 3) and image.dtype == np.uint8
    np.testing.assert_array_equal(image, draw_grid(np.asarray(obs), CELL))
    assert image.any()  # something besides the black background


def test_gif_of_a_rollout_has_one_frame_per_step(tmp_path):
    env = jaxsim.make("MinAtar/Breakout-v1")
    policy = jaxsim.RandomPolicy(env.action_space(env.default_params))
    out = jaxsim.rollout(env, policy, 12, num_envs=2, key=KEY)
    path = jaxsim.render_gif(env, out, tmp_path / "breakout.gif", env_index=1)
    with Image.open(path) as gif:
        assert gif.n_frames == 12 and gif.size == (10 * CELL, 10 * CELL)
    # The gif shows environment 1: its first frame is that environment's first observation.
    with Image.open(path) as gif:
        first = np.asarray(gif.convert("RGB"))
    np.testing.assert_array_equal(first, draw_grid(np.asarray(out.obs[0, 1]), CELL))
    with pytest.raises(ValueError, match=r"env_index=2 is not in \[0, 2\)"):
        jaxsim.render_gif(env, out, tmp_path / "x.gif", env_index=2)


def test_gif_of_states_and_a_traced_state_is_refused(tmp_path):
    env = jaxsim.make("MinAtar/SpaceInvaders-v0")
    params = env.default_params
    state, _ = env.reset(KEY, params)
    states = [state]
    for t in range(3):
        state, _ = env.step(jax.random.key(t), state, np.int32(1), params)
        states.append(state)
    with Image.open(jaxsim.render_gif(env, states, tmp_path / "si.gif")) as gif:
        assert gif.n_frames == 4
    with pytest.raises(TypeError, match=r"traced"):
        jax.jit(env.render)(state)


def test_gymnasium_rgb_array_is_the_same_drawing():
    gym = pytest.importorskip("gymnasium", reason="needs the gym extra")
    import jaxsim.gymnasium  # noqa: F401  (registers jaxsim/<id>)

    env = gym.make("jaxsim/MinAtar-Breakout-v0", render_mode="rgb_array")
    env.reset(seed=0)
    env.step(0)
    frame = env.render()
    assert env.metadata["render_fps"] == 20 and "rgb_array" in env.metadata["render_modes"]
    inner = env.unwrapped
    np.testing.assert_array_equal(frame, inner.jax_env.render(inner._state, inner.params))
    assert frame.shape == (10 * CELL, 10 * CELL, 3)
