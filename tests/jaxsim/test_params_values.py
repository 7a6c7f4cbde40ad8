"""Params values reaching a rollout meet the declarations `make` enforces, as float32/int32."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

import jaxsim

ENV = jaxsim.make("CartPole-v1")
P = ENV.default_params


def per_env(value, bad, at=2, num_envs=4):
    """A per-environment leaf holding `value` everywhere but `bad` at environment `at`."""
    return np.array([bad if i == at else value for i in range(num_envs)])


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        (P.replace(masspole=-0.1), ValueError, r"masspole must be a float > 0.0, got -0.1"),
        (P.replace(gravity=float("nan")), ValueError, r"gravity must be a finite float"),
        (P.replace(max_episode_steps=0), ValueError, r"max_episode_steps.*>= 1.*got 0"),
        (P.replace(max_episode_steps=2.5), TypeError, r"max_episode_steps must be an integer"),
        (P.replace(gravity=True), TypeError, r"gravity must be a float, got True"),
        (P.replace(gravity=jnp.bool_(True)), TypeError, r"gravity must be a float, got True"),
        (P.replace(masspole=per_env(0.1, -1.0)), ValueError, r"masspole of environment 2 must"),
        (P.replace(gravity=per_env(9.8, np.nan)), ValueError, r"gravity of environment 2 must"),
        (P.replace(gravity=jnp.array([True] * 4)), TypeError, r"gravity must hold a float"),
        (P.replace(max_episode_steps=per_env(9, 0)), ValueError, r"steps of environment 2 .*must"),
        (
            P.replace(max_episode_steps=np.full(4, 2.5)),
            TypeError,
            r"max_episode_steps of environment 0 must be an integer",
        ),
    ],
)
def test_rollout_refuses_params_make_refuses_naming_field_and_environment(params, error, match):
    with pytest.raises(error, match=r"rollout: params of CartPole-v1: .*" + match):
        jaxsim.rollout(ENV, "random", 3, num_envs=4, params=params, backend="scan")


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("gravity", 1e39, r"gravity must be a finite float in float32, got 1e\+39 \(float32 inf\)"),
        ("masspole", 1e-50, r"masspole must be a float > 0.0, got 1e-50 \(float32 0.0\)"),
        ("max_episode_steps", 2**40, r"max_episode_steps must be .* fits int32"),
    ],
)
def test_values_are_judged_as_the_dtype_they_will_have(field, value, match):
    with pytest.raises(ValueError, match=match):
        jaxsim.make("CartPole-v1", **{field: value})
    with pytest.raises(ValueError, match=match):
        jaxsim.rollout(ENV, "random", 3, params=P.replace(**{field: value}), backend="scan")
    with pytest.raises(ValueError, match=r"environment 2"):
        params = P.replace(**{field: per_env(getattr(P, field), value)})
        jaxsim.rollout(ENV, "random", 3, num_envs=4, params=params, backend="scan")


def test_replaced_sampler_bounds_are_checked_by_the_declarations():
    dr = jaxsim.uniform_params(ENV, masspole=(0.05, 0.5))
    with pytest.raises(ValueError, match=r"params_sampler: masspole must be a float > 0.0"):
        bad = dr.replace(low={"masspole": jnp.float32(-1.0)})
        jaxsim.rollout(ENV, "random", 3, num_envs=4, params_sampler=bad, backend="scan")
    with pytest.raises(ValueError, match=r"params_sampler masspole needs low <= high"):
        swapped = dr.replace(low=dr.high, high=dr.low)
        jaxsim.rollout(ENV, "random", 3, num_envs=4, params_sampler=swapped, backend="scan")


def test_a_python_list_is_one_per_environment_array():
    gravity = [9.0, 9.5, 10.0, 10.5]
    listed = jaxsim.rollout(ENV, "random", 5, num_envs=4, params=P.replace(gravity=gravity))
    arrayed = jaxsim.rollout(
        ENV, "random", 5, num_envs=4, params=P.replace(gravity=np.float32(gravity))
    )
    np.testing.assert_array_equal(listed.obs, arrayed.obs)
    with pytest.raises(ValueError, match=r"masspole of environment 1 .*must be a float > 0"):
        jaxsim.rollout(ENV, "random", 5, num_envs=4, params=P.replace(masspole=[0.1, -1, 0.1, 0.1]))
    state = jaxsim.initial_state(ENV, jax.random.key(0), 4, params=P.replace(gravity=gravity))
    assert state.obs.shape == (4, 4)


@struct.dataclass
class NegativeMassSampler:
    """A hand-written sampler whose draws (traced in the rollout) break masspole > 0."""

    mass: jax.Array  # environment 3 draws it; the others 0.1
    fields: tuple = struct.field(pytree_node=False, default=("masspole",))

    def draw(self, seed, index, counter):
        return {"masspole": jnp.where(index == 3, self.mass, 0.1) + 0.0 * counter}


@pytest.mark.parametrize("backend", ["scan", "fused"])
def test_checked_mode_flags_traced_params_outside_their_declarations(backend):
    config = jaxsim.FusedConfig(block_envs=4, steps_per_launch=2)
    kwargs = dict(
        num_envs=4, params_sampler=NegativeMassSampler(jnp.float32(-1.0)), backend=backend
    )
    jaxsim.rollout(ENV, "random", 3, fused_config=config, **kwargs)  # unchecked: runs
    with pytest.raises(ValueError, match=r"params outside their declared.*step 0, environment 3"):
        jaxsim.rollout(ENV, "random", 3, fused_config=config, checks=True, **kwargs)
