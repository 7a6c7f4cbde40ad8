"""env.render draws a state as Gymnasium's rgb_array does; render_gif animates a rollout."""

import dataclasses
import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim

PIL = pytest.importorskip("PIL", reason="rendering needs Pillow (the `render` extra)")
from PIL import Image  # noqa: E402

# Gymnasium's rgb_array size (height, width) of each environment.
SIZES = {
    "CartPole-v1": (400, 600),
    "Pendulum-v1": (500, 500),
    "MountainCar-v0": (400, 600),
    "MountainCarContinuous-v0": (400, 600),
    "Acrobot-v1": (500, 500),
}


def _two_states(env):
    """Two states of `env` that differ in every drawn variable."""
    a, _ = env.reset(jax.random.key(0), env.default_params)
    moved = {f: getattr(a, f) + jnp.float32(0.3) for f in _physical_fields(a)}
    return a, a.replace(**moved)


@functools.cache
def _batch_reset(env):
    """`env.reset` over a batch of keys, jitted once per environment (not compiled per op)."""
    return jax.jit(jax.vmap(env.reset, (0, None)))


def _physical_fields(state) -> list[str]:
    """The state's physical variables, in Gymnasium's `state` order (all but the step count)."""
    return [f.name for f in dataclasses.fields(state) if f.name != "time"]


@pytest.mark.parametrize("env_id", sorted(SIZES))
def test_frames_have_the_declared_shape_and_differ_between_states(env_id):
    env = jaxsim.make(env_id)
    a, b = _two_states(env)
    frame_a, frame_b = env.render(a), env.render(b, env.default_params)
    assert frame_a.shape == (*SIZES[env_id], 3) and frame_a.dtype == np.uint8
    assert isinstance(frame_a, np.ndarray) and frame_b.shape == frame_a.shape
    assert (frame_a != frame_b).any(axis=-1).sum() > 100  # the body moved
    assert (frame_a == 255).all(axis=-1).mean() > 0.5  # a white background, as Gymnasium's
    np.testing.assert_array_equal(env.render(a), frame_a)  # deterministic


def test_render_refuses_to_run_inside_jit():
    env = jaxsim.make("CartPole-v1")
    state, _ = env.reset(jax.random.key(0), env.default_params)
    with pytest.raises(TypeError, match="inside jax.jit"):
        jax.jit(lambda s: env.render(s).sum())(state)


def test_render_rejects_a_batch_and_says_so():
    env = jaxsim.make("CartPole-v1")
    states, _ = _batch_reset(env)(jax.random.split(jax.random.key(0), 3), env.default_params)
    with pytest.raises(ValueError, match="one environment"):
        env.render(states)
    params = env.default_params.replace(length=jnp.array([0.5, 1.0, 1.5]))
    state = jax.tree.map(lambda x: x[0], states)
    with pytest.raises(ValueError, match=r"params.length has shape \(3,\)"):
        env.render(state, params)
    # render_gif takes per-environment params and draws the chosen environment's.
    long = env.render(state, env.default_params.replace(length=1.5))
    short = env.render(state)
    assert (long != short).any()


def test_without_pillow_the_error_names_the_extra(monkeypatch):
    env = jaxsim.make("Pendulum-v1")
    state, _ = env.reset(jax.random.key(0), env.default_params)
    monkeypatch.setitem(sys.modules, "PIL", None)  # import fails as if not installed
    with pytest.raises(ImportError, match=r"jaxsim-rl\[render\]"):
        env.render(state)


def test_gif_of_a_trajectory_and_of_states(tmp_path):
    env = jaxsim.make("CartPole-v1")
    out = jaxsim.rollout(env, "random", 12, num_envs=3, key=jax.random.key(1))
    path = jaxsim.render_gif(env, out, tmp_path / "traj.gif", env_index=2, scale=0.5)
    with Image.open(path) as gif:
        assert gif.size == (300, 200)
        first = np.asarray(gif.convert("RGB"))
        durations = []
        for i in range(gif.n_frames):  # Pillow merges identical frames, adding their delays
            gif.seek(i)
            durations.append(gif.info["duration"])
    assert sum(durations) == 12 * 20  # 12 frames at CartPole's 50 fps
    # The trajectory's frames are the states its observations show, for the chosen environment.
    obs = np.asarray(out.obs[0, 2])
    state = env.state_type(*obs, jnp.int32(0))
    expected = np.asarray(Image.fromarray(env.render(state)).resize((300, 200)))
    assert np.abs(first.astype(int) - expected).mean() < 8  # GIF palette and resampling only
    # States with a leading [T, num_envs] axis, as an evaluation loop collects them.
    keys = jax.random.split(jax.random.key(2), 2)
    s0, _ = _batch_reset(env)(keys, env.default_params)
    states = jax.tree.map(lambda x: jnp.stack([x, x + 0.1 * jnp.ones_like(x)]), s0)
    path = jaxsim.render_gif(env, states, tmp_path / "states.gif", env_index=1, fps=10)
    with Image.open(path) as gif:
        assert gif.n_frames == 2 and gif.size == (600, 400) and gif.info["duration"] == 100
    assert not list(tmp_path.glob(".*.tmp"))  # written atomically


def test_gif_rejects_bad_input_before_drawing(tmp_path):
    env = jaxsim.make("Acrobot-v1")
    out = jaxsim.rollout(env, "random", 3, num_envs=2, key=jax.random.key(0))
    with pytest.raises(ValueError, match=r"env_index=5 is not in \[0, 2\)"):
        jaxsim.render_gif(env, out, tmp_path / "x.gif", env_index=5)
    with pytest.raises(TypeError, match="AcrobotState"):
        jaxsim.render_gif(env, {"theta1": 0.0}, tmp_path / "x.gif")
    with pytest.raises(ValueError, match="fps must be > 0"):
        jaxsim.render_gif(env, out, tmp_path / "x.gif", fps=0)
    assert not (tmp_path / "x.gif").exists()


def test_gymnasium_front_renders_with_the_same_drawing():
    gymnasium = pytest.importorskip("gymnasium", reason="needs the gym extra")
    import jaxsim.gymnasium

    env = gymnasium.make("jaxsim/Acrobot-v1", render_mode="rgb_array")
    assert env.unwrapped.render() is None  # nothing to draw before reset
    env.reset(seed=0)
    env.step(1)
    frame = env.render()
    np.testing.assert_array_equal(frame, env.unwrapped.jax_env.render(env.unwrapped._state))
    assert env.metadata["render_fps"] == 15
    with pytest.raises(ValueError, match="render_mode"):
        jaxsim.gymnasium.JaxsimEnv("Acrobot-v1", render_mode="ansi")


@pytest.mark.parametrize("env_id", sorted(SIZES))
def test_frames_match_gymnasium_rgb_array(env_id):
    """Same state, Gymnasium's pygame drawing against ours: same size, nearly the same pixels."""
    gymnasium = pytest.importorskip("gymnasium", reason="needs the gym extra")
    pytest.importorskip("pygame", reason="Gymnasium draws with pygame, which is not installed")
    env = jaxsim.make(env_id)
    _, state = _two_states(env)
    gym_env = gymnasium.make(env_id, render_mode="rgb_array")
    gym_env.reset(seed=0)
    gym_env.unwrapped.state = np.array([float(getattr(state, f)) for f in _physical_fields(state)])
    theirs, ours = gym_env.render(), env.render(state)
    assert theirs.shape == ours.shape
    differs = (np.abs(theirs.astype(int) - ours.astype(int)) > 64).any(axis=-1)
    assert differs.mean() < 0.01, differs.mean()  # edges only: anti-aliasing, rounding


def test_gif_draws_the_chosen_environments_params(tmp_path):
    env = jaxsim.make("CartPole-v1")
    keys = jax.random.split(jax.random.key(0), 3)
    states, _ = _batch_reset(env)(keys, env.default_params)
    params = env.default_params.replace(length=jnp.array([0.5, 1.0, 1.5]))
    steps = jax.tree.map(lambda x: x[None], states)  # [T=1, num_envs=3]
    path = jaxsim.render_gif(env, steps, tmp_path / "p.gif", env_index=2, params=params)
    with Image.open(path) as gif:
        frame = np.asarray(gif.convert("RGB")).astype(int)
    one = jax.tree.map(lambda x: x[2], states)
    right = env.render(one, env.default_params.replace(length=1.5))
    wrong = env.render(one, env.default_params)
    assert np.abs(frame - right).mean() < np.abs(frame - wrong).mean() / 4
