"""jaxsim.check_env: each way an environment can disagree with its declarations is named."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

import jaxsim
from jaxsim.contract import block_reason, output_problems
from jaxsim.params import field

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from examples.catch import COLS, ROWS, Catch, CatchParams


def _problems(cls) -> str:
    return "\n".join(output_problems(cls()))


class ThreeOfFour(Catch):  # 50 components under a declared (4,) space
    def observation_space(self, params):
        return jaxsim.Box(0.0, 1.0, (4,))


class Transposed(Catch):
    def observation_space(self, params):
        return jaxsim.Box(0.0, 1.0, (COLS, ROWS))


class BoolDeclared(Catch):
    def observation_space(self, params):
        return jaxsim.Box(0.0, 1.0, (ROWS, COLS), jnp.bool_)


def _with_terminated(value):
    class Bad(Catch):
        def dynamics(self, s, action, params):
            s, reward, _ = super().dynamics(s, action, params)
            return s, reward, value(s)

    return Bad


class WideReward(Catch):
    def dynamics(self, s, action, params):
        s, reward, landed = super().dynamics(s, action, params)
        return s, jnp.stack([reward, reward]), landed


@pytest.mark.parametrize(
    "cls, words",
    [
        (ThreeOfFour, ["obs_fields", "shape (10, 5)", "declares (4,)"]),
        (Transposed, ["obs_fields", "shape (10, 5)", "declares (5, 10)"]),
        (BoolDeclared, ["float32", "declares bool"]),
        (_with_terminated(lambda s: False), ["terminated is a Python bool", "bool scalar"]),
        (_with_terminated(lambda s: ROWS - 1 - s.ball_row), ["terminated is int32[]"]),
        (_with_terminated(lambda s: (s.ball_row == ROWS - 1)[None]), ["terminated is bool[1]"]),
        (WideReward, ["reward is float32[2]", "float scalar"]),
    ],
)
def test_each_mismatch_is_named_with_method_field_and_declaration(cls, words):
    text = _problems(cls)
    for word in words:
        assert word in text, (word, text)
    with pytest.raises(jaxsim.EnvCheckError):
        jaxsim.check_env(cls())


def test_make_rollout_and_the_vector_front_refuse_a_mismatch_before_stepping():
    jaxsim.register("ThreeOfFour-v0", ThreeOfFour)
    with pytest.raises(jaxsim.EnvCheckError, match="declares \\(4,\\)"):
        jaxsim.make("ThreeOfFour-v0")
    with pytest.raises(jaxsim.EnvCheckError, match="declares \\(4,\\)"):
        jaxsim.rollout(ThreeOfFour(), "random", 2, num_envs=2)
    pytest.importorskip("gymnasium", reason="the vector front needs the gymnasium extra")
    front = importlib.import_module("jaxsim.gymnasium")
    with pytest.raises(jaxsim.EnvCheckError, match="declares \\(4,\\)"):
        front.make_vec("ThreeOfFour-v0", num_envs=2)


def test_a_missing_episode_limit_is_refused_at_class_definition():
    @struct.dataclass
    class NoLimit:
        speed: float = 1.0

    with pytest.raises(TypeError, match="max_episode_steps"):

        class Limitless(Catch):
            params_type = NoLimit


def test_the_replaced_randomness_knobs_name_their_replacement():
    with pytest.raises(TypeError, match=r"num_reset_uniforms.*Draws\(reset=n\)"):

        class Old(Catch):
            num_reset_uniforms = 1


def test_a_default_outside_its_declared_range_is_named():
    @struct.dataclass
    class BadDefault:
        max_episode_steps: int = field(0, ge=1, lt=2**31)

    class Bad(Catch):
        params_type = BadDefault

    assert "default_params" in _problems(Bad) and "max_episode_steps" in _problems(Bad)


def test_a_reset_that_ignores_its_draws_is_named():
    class Fixed(Catch):
        def init_state(self, u, params):
            return super().init_state((u[0] * 0,), params)

    with pytest.raises(jaxsim.EnvCheckError, match="ignores its randomness"):
        jaxsim.check_env(Fixed())


def test_the_kernels_limits_are_predicted_before_a_fused_rollout():
    class Scattered(Catch):  # `.at[].set` into a fixed shape: fine per environment, not a block
        def dynamics(self, s, action, params):
            s, reward, landed = super().dynamics(s, action, params)
            return (
                s.replace(paddle_col=jnp.zeros(2, jnp.int32).at[0].set(s.paddle_col)[0]),
                reward,
                landed,
            )

    class KeyDrawn(Catch):
        draws = jaxsim.Draws(reset="key")

        def init_state(self, key, params):
            return super().init_state((jnp.float32(0.5) + 0 * key[0],), params)

    reason = block_reason(Scattered())
    assert "Scattered.dynamics fails on a block" in reason and "elementwise" in reason
    assert "PRNG key" in jaxsim.fused.unsupported_reason(KeyDrawn())
    report = jaxsim.check_env(Scattered(), steps=4)  # the scan runs it; the report says why not
    assert report.fused is not None and "elementwise" in report.fused
    with pytest.raises(ValueError, match="elementwise"):
        jaxsim.rollout(Scattered(), "random", 2, num_envs=2, backend="fused")


def test_batch_mixing_code_that_keeps_its_shapes_is_caught_by_comparing_backends():
    class Summed(Catch):  # a reduction over the batch, broadcast back: same shapes
        def dynamics(self, s, action, params):
            s, reward, landed = super().dynamics(s, action, params)
            return s.replace(paddle_col=s.paddle_col * 0 + jnp.max(s.paddle_col)), reward, landed

    with pytest.raises(jaxsim.EnvCheckError, match="fused backend: obs differs"):
        jaxsim.check_env(Summed(), num_envs=4, steps=4)


def test_a_python_constant_reward_and_flag_run_on_both_backends():
    class Constant(Catch):
        def dynamics(self, s, action, params):
            s, _, landed = super().dynamics(s, action, params)
            return s, 1.0, landed  # a Python float reward is fine: it takes the lanes' shape

    env = Constant()
    runs = [
        jaxsim.rollout(env, "random", 12, num_envs=4, backend=b,
                       **({"fused_config": jaxsim.FusedConfig(4, 4)} if b == "fused" else {}))
        for b in ("scan", "fused")
    ]  # fmt: skip
    np.testing.assert_array_equal(runs[0].reward, runs[1].reward)
    assert float(runs[0].reward.sum()) == 12 * 4


@pytest.mark.parametrize("kw", [dict(steps=0), dict(steps=2.5), dict(num_envs=0)])
def test_bad_check_sizes_are_named_before_any_work(kw, monkeypatch):
    def no_work(env):
        raise AssertionError("the sizes must be checked before the environment is")

    monkeypatch.setattr(importlib.import_module("jaxsim.check_env"), "output_problems", no_work)
    (name,) = kw
    with pytest.raises(ValueError, match=rf"check_env: {name} must be an integer in \[1, "):
        jaxsim.check_env("CartPole-v1", **kw)


def test_every_shipped_native_env_passes_the_cheap_check():
    for env_id in jaxsim.envs.NATIVE_IDS:
        assert output_problems(jaxsim.make(env_id)) == [], env_id


def test_register_and_module_class_ids():
    env = jaxsim.make("examples.catch:Catch")
    assert env.id == "examples.catch:Catch" and jaxsim.make(env.id) == env
    jaxsim.register("MyCatch-v0", "examples.catch:Catch", max_episode_steps=7)
    made = jaxsim.make("MyCatch-v0")
    assert made.id == "MyCatch-v0" and int(made.default_params.max_episode_steps) == 7
    assert "MyCatch-v0" in jaxsim.registered_ids()
    with pytest.raises(ValueError, match="native id"):
        jaxsim.register("CartPole-v1", Catch)
    with pytest.raises(TypeError, match="entry_point"):
        jaxsim.register("Nothing-v0", 42)
    with pytest.raises(ValueError, match="cannot import"):
        jaxsim.make("examples.catch:Nope")
    assert CatchParams().max_episode_steps == 100


def test_a_users_gymnax_environment_enters_through_registration():
    cartpole = pytest.importorskip("gymnax.environments.classic_control.cartpole", reason="gymnax")
    jaxsim.register("UserGymnaxCartPole-v0", cartpole.CartPole())  # an object of the user's
    env = jaxsim.make("UserGymnaxCartPole-v0", max_episode_steps=20)
    assert env.id == "UserGymnaxCartPole-v0"
    out = jaxsim.rollout(env, "random", 25, num_envs=3)
    assert out.obs.shape == (25, 3, 4) and bool(out.truncated.any() | out.terminated.any())
    assert jaxsim.make("gymnax.environments.classic_control.cartpole:CartPole").id.endswith(
        ":CartPole"
    )  # a gymnax class by its import path, unregistered


def test_sampling_a_box_as_wide_as_float32_stays_finite():
    space = jaxsim.make("CartPole-v1").observation_space(jaxsim.make("CartPole-v1").default_params)
    x = np.asarray(space.sample(jax.random.key(0)))  # numpy's hi - lo overflowed (a warning)
    assert np.isfinite(x).all() and bool(space.contains(x))
