"""Checked mode: whatever a rollout computes is checked, on both backends, whatever it keeps."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim
from jaxsim import OpenLoopPolicy

KEY = jax.random.key(5)
FUSED = dict(backend="fused", fused_config=jaxsim.FusedConfig(block_envs=4, steps_per_launch=3))
BACKENDS = {"scan": dict(backend="scan"), "fused": FUSED}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("outputs", ["stats", "rewards", ("action",)])
def test_nan_physics_is_reported_whatever_outputs_keep(backend, outputs):
    env = jaxsim.make("Pendulum-v1")
    # Valid params (NaN ones are refused up front) that overflow float32 at once in
    # environment 2: its angle becomes inf, its observed cosine NaN.
    dt = jnp.asarray([0.05, 0.05, 1e30, 0.05, 0.05])
    params = env.default_params.replace(dt=dt, max_speed=3e38)
    kw = dict(num_envs=5, key=KEY, params=params, outputs=outputs, **BACKENDS[backend])
    with pytest.raises(FloatingPointError, match=r"non-finite next_obs at step 0, environment 2"):
        jaxsim.rollout(env, "random", 6, checks=True, **kw)
    out = jaxsim.rollout(env, "random", 6, **kw)  # unchecked: runs, and says nothing
    assert out.checks is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_of_range_discrete_actions_are_reported_and_otherwise_clipped(backend):
    env = jaxsim.make("CartPole-v1")
    n, num_envs = 5, 4
    valid = jax.random.randint(KEY, (n, num_envs), 0, 2, jnp.int32)
    invalid = valid.at[3, 1].set(2).at[4, 2].set(-1)
    kw = dict(num_envs=num_envs, key=KEY, **BACKENDS[backend])
    with pytest.raises(ValueError, match=r"action outside Discrete\(2\) at step 3, environment 1"):
        jaxsim.rollout(env, OpenLoopPolicy(invalid), n, checks=True, **kw)
    # Unchecked, 2 plays as 1 and -1 as 0, on every backend and in Env.step alike.
    got = jaxsim.rollout(env, OpenLoopPolicy(invalid), n, **kw)
    clipped = jaxsim.rollout(env, OpenLoopPolicy(jnp.clip(invalid, 0, 1)), n, **kw)
    np.testing.assert_array_equal(got.next_obs, clipped.next_obs)
    state, _ = env.reset(KEY, env.default_params)
    _, pushed = env.step(KEY, state, jnp.int32(7), env.default_params)
    _, right = env.step(KEY, state, jnp.int32(1), env.default_params)
    np.testing.assert_array_equal(pushed.obs, right.obs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_policy_with_nan_weights_is_reported(backend):
    env = jaxsim.make("CartPole-v1")
    policy = jaxsim.init_mlp_policy(jax.random.key(0), env, hidden=(8,))
    (w, b), head = policy.actor
    policy = policy.replace(actor=((w.at[0, 0].set(jnp.nan), b), head))
    kw = dict(num_envs=4, key=KEY, outputs="rewards", **BACKENDS[backend])
    with pytest.raises(FloatingPointError, match=r"non-finite extras at step 0, environment 0"):
        jaxsim.rollout(env, policy, 3, checks=True, **kw)


def test_a_nan_box_action_is_reported_with_what_it_broke():
    env = jaxsim.make("Pendulum-v1")

    def policy(key, obs):
        bad = jnp.arange(obs.shape[0]) == 2
        return jnp.where(bad, jnp.nan, 0.0)[:, None].astype(jnp.float32)

    match = r"non-finite action, reward, next_obs at step 0, environment 2 \(first of 4 bad"
    with pytest.raises(FloatingPointError, match=match):
        jaxsim.rollout(env, policy, 4, num_envs=3, checks=True)
    out = jaxsim.rollout(env, policy, 4, num_envs=3)
    assert np.isnan(out.reward[0, 2]) and np.isfinite(out.reward[0, :2]).all()


def test_checked_and_unchecked_rollouts_agree_and_checks_must_be_a_bool():
    env = jaxsim.make("Acrobot-v1")
    a = jaxsim.rollout(env, "random", 8, num_envs=3, key=KEY, checks=True)
    b = jaxsim.rollout(env, "random", 8, num_envs=3, key=KEY)
    np.testing.assert_array_equal(a.next_obs, b.next_obs)
    assert (np.asarray(a.checks.first_step) == -1).all()
    with pytest.raises(TypeError, match=r"checks must be True or False, got 'yes'"):
        jaxsim.rollout(env, "random", 8, checks="yes")


def test_done_and_stats_of_a_trajectory_that_kept_neither_say_what_to_keep():
    out = jaxsim.rollout(jaxsim.make("CartPole-v1"), "random", 3, outputs=["obs"])
    with pytest.raises(ValueError, match=r"Trajectory.done: this trajectory kept no terminated"):
        out.done
    with pytest.raises(ValueError, match=r"episode_stats: this trajectory kept neither"):
        out.episode_stats()


# ----------------------------------------------------------------------- low-level bad input
def test_reset_and_step_name_a_bad_key_state_or_action():
    env, pendulum = jaxsim.make("CartPole-v1"), jaxsim.make("Pendulum-v1")
    params = env.default_params
    with pytest.raises(ValueError, match=r"CartPole-v1.reset: key must be one PRNG key.*got 0"):
        env.reset(0, params)
    state, _ = env.reset(KEY, params)
    batched, _ = jax.vmap(env.reset, (0, None))(jax.random.split(KEY, 3), params)
    p_state, _ = pendulum.reset(KEY, pendulum.default_params)
    cases = [
        (batched, 0, ValueError, r"state.x has shape \(3,\), but one environment's is \(\)"),
        (p_state, 0, TypeError, r"state must be a CartPoleState.*got PendulumState"),
        (state, 0.5, ValueError, r"must be an integer array of shape \(\).*float32\[\]"),
        (state, jnp.zeros(2, jnp.int32), ValueError, r"of shape \(\).*int32\[2\]"),
    ]
    for bad_state, action, error, match in cases:
        with pytest.raises(error, match=match):
            env.step(KEY, bad_state, action, params)
    _, ts = env.step(KEY, state, 1, params)  # a Python int is one Discrete action
    assert ts.obs.shape == (4,)
    with pytest.raises(ValueError, match=r"action must be a float array of shape \(1,\)"):
        pendulum.step(KEY, p_state, jnp.zeros((2,)), pendulum.default_params)


@pytest.mark.parametrize("n", [2**31, -1])
def test_a_step_count_beyond_int32_is_refused(n):
    with pytest.raises(ValueError, match=r"n must be an integer in \[1, 2\*\*31 - 1\]"):
        jaxsim.rollout(jaxsim.make("CartPole-v1"), "random", n)


def test_a_rollout_that_cannot_fit_in_memory_is_refused_with_what_fits(monkeypatch):
    from jaxsim.rollout import checks as memory

    monkeypatch.setattr(memory, "_available_bytes", lambda: 10**9)  # 1 GB free
    env = jaxsim.make("CartPole-v1")
    # all: 10**6 steps x 4096 envs x 50 B = 205 GB; rewards: 6 B per env-step, 24.6 GB.
    with pytest.raises(MemoryError, match=r"outputs='all' records 205 GB.*has 1 GB free") as info:
        jaxsim.rollout(env, "random", 10**6, num_envs=4096)
    assert "presets that fit: 'stats' (0 GB)" in str(info.value)
    small = jaxsim.rollout(env, "random", 10, num_envs=4, outputs="rewards")  # fits: runs
    assert small.reward.shape == (10, 4)


def test_the_memory_check_counts_env_state_and_params_before_any_work(monkeypatch):
    import importlib

    from jaxsim.rollout import checks as memory

    scan_module = importlib.import_module("jaxsim.rollout.scan")

    def never(*args):
        raise AssertionError("the rollout ran; it should have been refused before any work")

    monkeypatch.setattr(memory, "_available_bytes", lambda: 16 * 10**9)  # 16 GB free
    monkeypatch.setattr(scan_module, "scan_jit", never)
    env = jaxsim.make("Swarm-v0", num_particles=4096)  # 20 N + 4 bytes of state per environment
    # 2**18 environments: 2 x 21.5 GB of state (read one, write the next), no outputs kept.
    with pytest.raises(MemoryError, match=r"env state 43 GB, params .* records 0 GB") as info:
        jaxsim.rollout(env, "random", 10, num_envs=2**18, outputs="stats", backend="scan")
    assert "has 16 GB free" in str(info.value)
    assert "num_envs <= 97" in str(info.value)  # 16e9 / (2 * 81,964 B)
    # Per-environment params count too: a [num_envs] leaf of 2**31 - 1 float32 values is 8.6 GB.
    monkeypatch.setattr(memory, "_available_bytes", lambda: 10**9)
    small = jaxsim.make("Swarm-v0", num_particles=4)
    params = jax.ShapeDtypeStruct((2**31 - 1,), jnp.float32)
    with pytest.raises(MemoryError, match=r"params 8.59 GB"):
        memory.check_memory(
            small, None, KEY, 1, 2**31 - 1, ("reward",), small.default_params.replace(dt=params)
        )
