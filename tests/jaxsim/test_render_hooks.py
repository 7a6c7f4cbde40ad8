"""Environments draw themselves (`Env.draw`); rendering imports none; Swarm draws; what cannot
be drawn (a NaN state, an ambiguous batch, an environment without a drawing) is refused clearly."""

import ast
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim
from jaxsim.envs.classic_control import CartPole

pytest.importorskip("PIL", reason="rendering needs Pillow (the `render` extra)")
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _reset(env, key=0):
    """`env.reset`, jitted: one compile per environment instead of one per primitive."""
    state, _ = jax.jit(env.reset)(jax.random.key(key), env.default_params)
    return state


# ----------------------------------------------------------------------------- the drawing hook
def test_rendering_imports_no_environment():
    tree = ast.parse((ROOT / "jaxsim" / "rendering.py").read_text())
    imported = [
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    ]
    assert not [m for m in imported if m and ("envs" in m or m == "jaxsim.core")], imported


def test_an_environment_supplies_its_own_drawing(tmp_path):
    class Dotted(CartPole):
        render_fps = 7

        def draw(self, state, params):
            return np.full((2, 3, 3), int(state.time), np.uint8)

    env = Dotted()
    assert env.renderable and jaxsim.rendering.default_fps(env) == 7
    state = _reset(env).replace(time=jnp.int32(5))
    np.testing.assert_array_equal(env.render(state), np.full((2, 3, 3), 5, np.uint8))
    # An environment that draws nothing says so, here and in render_gif.
    pytest.importorskip("gymnax", reason="the adapters are environments that do not draw")
    plain = jaxsim.make("gymnax/CartPole-v1")
    assert not plain.renderable and jaxsim.rendering.default_fps(plain) is None
    with pytest.raises(NotImplementedError, match="gymnax/CartPole-v1: .*cannot draw"):
        plain.render(_reset(plain))
    with pytest.raises(NotImplementedError, match="cannot draw"):
        jaxsim.render_gif(plain, [_reset(plain)], tmp_path / "never.gif")
    assert not (tmp_path / "never.gif").exists()


# ------------------------------------------------------------------------------------------ Swarm
def test_swarm_draws_its_particles_and_goal():
    env = jaxsim.make("Swarm-N16-v0")
    state = _reset(env)
    frame = env.render(state)
    assert frame.shape == (500, 500, 3) and frame.dtype == np.uint8
    blue = (frame == (31, 119, 180)).all(axis=-1)
    red = (frame == (214, 39, 40)).all(axis=-1)
    assert blue.sum() > 16 * 10 and red.sum() > 50  # every particle and the goal show
    moved = env.render(state.replace(x=state.x + 1.0))
    assert (moved != frame).any(axis=-1).sum() > 100
    # The goal is drawn where params put it.
    params = env.default_params.replace(goal_x=3.0)
    red_moved = (env.render(state, params) == (214, 39, 40)).all(axis=-1)
    assert np.nonzero(red_moved)[1].mean() > np.nonzero(red)[1].mean() + 150
    big = jaxsim.make("Swarm-v0", num_particles=4096)
    assert big.render(_reset(big)).shape == (500, 500, 3)


def test_swarm_gif_from_states_and_a_clear_refusal_of_its_trajectory(tmp_path):
    env = jaxsim.make("Swarm-N4-v0")
    keys = jax.random.split(jax.random.key(1), 3)
    batch = jax.jit(jax.vmap(env.reset, (0, None)))(keys, env.default_params)[0]
    states = jax.tree.map(lambda x: jnp.stack([x, x + 0.5]), batch)  # [T=2, num_envs=3]
    path = jaxsim.render_gif(env, states, tmp_path / "swarm.gif", env_index=2)
    with Image.open(path) as gif:
        assert gif.n_frames == 2 and gif.size == (500, 500) and gif.info["duration"] == 50
    # A Trajectory keeps observations: eight statistics of the swarm, not where each particle is.
    fields = jaxsim.Trajectory.__dataclass_fields__
    out = jaxsim.Trajectory(**dict.fromkeys(fields, None) | {"obs": jnp.zeros((3, 2, 8))})
    with pytest.raises(NotImplementedError, match="observations do not determine"):
        jaxsim.render_gif(env, out, tmp_path / "traj.gif")
    assert not (tmp_path / "traj.gif").exists()


# --------------------------------------------------------------------------- what is refused
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_non_finite_state_is_a_clear_error_naming_the_field(tmp_path, bad):
    env = jaxsim.make("CartPole-v1")
    state = _reset(env)
    with pytest.raises(ValueError, match=rf"CartPole-v1 state\.x is {bad}.*not finite"):
        env.render(state.replace(x=jnp.float32(bad)))
    swarm = jaxsim.make("Swarm-N4-v0")
    one = _reset(swarm)
    with pytest.raises(ValueError, match=r"state\.y is"):
        swarm.render(one.replace(y=one.y.at[2].set(bad)))
    with pytest.raises(ValueError, match=r"params\.length is"):
        env.render(state, env.default_params.replace(length=bad))
    frames = [state, state.replace(theta=jnp.float32(bad))]
    with pytest.raises(ValueError, match=r"states\[1\]\.theta is"):
        jaxsim.render_gif(env, frames, tmp_path / "nan.gif")
    assert not (tmp_path / "nan.gif").exists()


def test_far_away_but_finite_values_still_draw():
    env = jaxsim.make("CartPole-v1")
    frame = env.render(_reset(env).replace(x=jnp.float32(3e38), theta=jnp.float32(1e30)))
    assert frame.shape == (400, 600, 3)
    swarm = jaxsim.make("Swarm-N4-v0")
    one = _reset(swarm)
    assert swarm.render(one.replace(x=one.x.at[0].set(-3e38))).shape == (500, 500, 3)


def test_gif_of_a_batched_state_is_refused_not_drawn_as_time(tmp_path):
    env = jaxsim.make("CartPole-v1")
    keys = jax.random.split(jax.random.key(0), 4)
    reset = jax.jit(jax.vmap(env.reset, (0, None)))
    batch = reset(keys, env.default_params)[0]  # leaves [num_envs=4]
    for env_index in (None, 1):
        with pytest.raises(ValueError, match=r"leaves \[4\] are ambiguous.*env_index"):
            jaxsim.render_gif(env, batch, tmp_path / "b.gif", env_index=env_index)
    out = jaxsim.rollout(env, "random", 2, num_envs=4)
    with pytest.raises(TypeError, match="RolloutState"):
        jaxsim.render_gif(env, out.final_state, tmp_path / "b.gif")
    assert not (tmp_path / "b.gif").exists()
    # The same states as one step of [T=1, num_envs=4], or one environment's list, draw.
    one_step = jax.tree.map(lambda x: x[None], batch)
    with Image.open(jaxsim.render_gif(env, one_step, tmp_path / "1.gif", env_index=3)) as gif:
        assert gif.n_frames == 1
        drawn = np.asarray(gif.convert("RGB")).astype(int)
    expected = env.render(jax.tree.map(lambda x: x[3], batch))
    assert np.abs(drawn - expected).mean() < 2
    listed = [jax.tree.map(lambda x, i=i: x[i], batch) for i in range(4)]
    with Image.open(jaxsim.render_gif(env, listed, tmp_path / "4.gif")) as gif:
        assert gif.n_frames == 4


# ----------------------------------------------------------------------------- Gymnasium front
def test_gymnasium_renders_swarm_and_refuses_rgb_array_where_nothing_draws():
    gym = pytest.importorskip("gymnasium", reason="needs the gym extra")
    from gymnasium.utils.env_checker import check_env

    import jaxsim.gymnasium

    for env_id in ("jaxsim/Swarm-v0", "jaxsim/Swarm-N4-v0"):
        env = gym.make(env_id, render_mode="rgb_array")
        check_env(env.unwrapped)  # the render check included
        env.reset(seed=0)
        assert env.render().shape == (500, 500, 3)
        assert env.metadata["render_fps"] == 20
    pytest.importorskip("gymnax", reason="the adapters are environments that do not draw")
    with pytest.raises(ValueError, match=r"render_mode='rgb_array' refused.*cannot draw"):
        jaxsim.gymnasium.make("gymnax/CartPole-v1", render_mode="rgb_array")
    plain = jaxsim.gymnasium.make("gymnax/CartPole-v1")
    assert plain.metadata["render_modes"] == [] and plain.unwrapped.render() is None
