"""Every registered environment: the API contract, spaces, and parity with Gymnasium."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim
from jaxsim import Box, Discrete

IDS = jaxsim.registered_ids()
# MinAtar's -v0 and -v1 ids differ only in their action set, which test_minatar.py covers:
# one id per game here keeps these per-environment tests' compiles down.
ONE_PER_GAME = [i for i in IDS if not (i.startswith("MinAtar/") and i.endswith("-v0"))]
# The environments Gymnasium also has: the parity tests compare these.
CLASSIC = ["Acrobot-v1", "CartPole-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1"]
KEY = jax.random.key(0)


def test_registry_lists_classic_control_cartpole_without_velocities_the_swarms_and_minatar():
    swarms = ["Swarm-N16-v0", "Swarm-N256-v0", "Swarm-N4-v0", "Swarm-N64-v0", "Swarm-v0"]
    minatar = [i for i in IDS if i.startswith("MinAtar/")]
    assert IDS == sorted([*CLASSIC, "CartPole-NoVel-v1", *minatar, *swarms])
    assert {"MinAtar/Breakout-v0", "MinAtar/Breakout-v1"} <= set(minatar)


def test_unknown_id_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown environment id 'CartPole-v0'.*CartPole-v1"):
        jaxsim.make("CartPole-v0")


def test_overrides_replace_params_and_unknown_ones_are_named():
    env = jaxsim.make("CartPole-v1", max_episode_steps=20, gravity=9.81)
    assert env.default_params.max_episode_steps == 20
    assert env.default_params.gravity == 9.81
    assert env == jaxsim.make("CartPole-v1", gravity=9.81, max_episode_steps=20)
    assert env != jaxsim.make("CartPole-v1")
    with pytest.raises(TypeError, match=r"unknown argument\(s\) \['gravty'\].*'gravity'"):
        jaxsim.make("CartPole-v1", gravty=9.81)


def test_params_and_state_are_frozen():
    env = jaxsim.make("Pendulum-v1")
    params = env.default_params
    with pytest.raises(dataclasses.FrozenInstanceError):
        params.g = 9.81
    state, _ = env.reset(KEY, params)
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.theta = 0.0


def test_params_of_another_env_are_rejected():
    env = jaxsim.make("CartPole-v1")
    other = jaxsim.make("Pendulum-v1").default_params
    with pytest.raises(TypeError, match="params must be CartPoleParams.*got PendulumParams"):
        env.reset(KEY, other)


@pytest.mark.parametrize("env_id", ONE_PER_GAME)
def test_reset_and_step_under_jit_and_vmap(env_id):
    env = jaxsim.make(env_id)
    params = env.default_params
    obs_space, act_space = env.observation_space(params), env.action_space(params)
    batch = 7
    keys = jax.random.split(KEY, batch)

    # Two jitted programs: the batched calls, and the unbatched ones compared with them (eagerly,
    # a step is a compile per op). One program per call compiled 1.3-3x longer on the MinAtar
    # games; one program holding all four calls, longer still on Freeway.
    @jax.jit
    def batched(keys, params):
        state, obs = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
        actions = jax.vmap(act_space.sample)(keys)
        new_state, ts = jax.vmap(env.step, in_axes=(0, 0, 0, None))(keys, state, actions, params)
        return state, obs, actions, new_state, ts

    @jax.jit
    def unbatched(key, action, params):
        state, obs = env.reset(key, params)
        return obs, env.step(key, state, action, params)[1]

    state, obs, actions, new_state, ts = batched(keys, params)
    one_obs, one_ts = unbatched(keys[0], actions[0], params)
    assert obs.shape == (batch, *obs_space.shape) and obs.dtype == obs_space.dtype
    assert actions.shape == (batch, *act_space.shape) and actions.dtype == act_space.dtype
    assert ts.obs.shape == obs.shape and ts.obs.dtype == obs_space.dtype
    assert ts.reward.shape == (batch,) and ts.reward.dtype == jnp.float32
    assert ts.terminated.dtype == jnp.bool_ and ts.truncated.dtype == jnp.bool_
    # Scan carries never change type.
    assert jax.tree.map(lambda x: (x.shape, x.dtype), state) == jax.tree.map(
        lambda x: (x.shape, x.dtype), new_state
    )
    np.testing.assert_array_equal(new_state.time, 1)
    # The unbatched call agrees with the vmapped one.
    np.testing.assert_allclose(one_obs, obs[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(one_ts.obs, ts.obs[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("env_id", ONE_PER_GAME)
def test_observations_stay_inside_the_observation_space(env_id):
    env = jaxsim.make(env_id)
    space = env.observation_space(env.default_params)
    out = jaxsim.rollout(env, "random", 300, num_envs=16, key=KEY)
    for obs in (out.obs, out.next_obs):
        flat = obs.reshape(-1, *space.shape)
        assert bool(jnp.all(jax.vmap(space.contains)(flat)))


@pytest.mark.parametrize("env_id", CLASSIC)
def test_state_fields_are_named_as_gymnasium_names_them(env_id):
    names = {
        "CartPole-v1": ["x", "x_dot", "theta", "theta_dot"],
        "Pendulum-v1": ["theta", "theta_dot"],
        "MountainCar-v0": ["position", "velocity"],
        "MountainCarContinuous-v0": ["position", "velocity"],
        "Acrobot-v1": ["theta1", "theta2", "dtheta1", "dtheta2"],
    }[env_id]
    env = jaxsim.make(env_id)
    fields = [f.name for f in dataclasses.fields(env.state_type)]
    assert fields == [*names, "time"]


# ------------------------------------------------------------------------------------------ spaces
def test_discrete_space():
    space = Discrete(3)
    samples = jax.vmap(space.sample)(jax.random.split(KEY, 300))
    assert samples.dtype == jnp.int32 and set(np.unique(samples)) == {0, 1, 2}
    assert bool(space.contains(jnp.int32(2))) and not bool(space.contains(jnp.int32(3)))
    assert not bool(space.contains(jnp.float32(1.0)))
    assert not bool(space.contains(jnp.zeros(2, jnp.int32)))
    with pytest.raises(ValueError, match="n must be a positive integer"):
        Discrete(0)


def test_box_space():
    space = Box(-1.0, 2.0, (2,))
    assert space.low.tolist() == [-1.0, -1.0] and space.shape == (2,)
    samples = jax.vmap(space.sample)(jax.random.split(KEY, 500))
    assert samples.shape == (500, 2) and samples.dtype == jnp.float32
    assert float(samples.min()) >= -1.0 and float(samples.max()) <= 2.0
    assert bool(space.contains(jnp.array([0.0, 2.0])))
    assert not bool(space.contains(jnp.array([0.0, 2.5])))
    assert not bool(space.contains(jnp.zeros(3)))
    half = Box([0.0, -np.inf], [np.inf, np.inf])
    s = jax.vmap(half.sample)(jax.random.split(KEY, 500))
    assert bool(jnp.all(s[:, 0] >= 0)) and float(s[:, 1].min()) < 0 < float(s[:, 1].max())
    assert Box(-1.0, 2.0, (2,)) == space and hash(Box(-1.0, 2.0, (2,))) == hash(space)
    with pytest.raises(ValueError, match="low must be <= high"):
        Box(1.0, 0.0, (1,))


# ------------------------------------------------------------------------ parity with Gymnasium
gym = pytest.importorskip("gymnasium")

GYM_STATE = {  # how to read and write Gymnasium's internal state as our state fields
    "CartPole-v1": ["x", "x_dot", "theta", "theta_dot"],
    "Pendulum-v1": ["theta", "theta_dot"],
    "MountainCar-v0": ["position", "velocity"],
    "MountainCarContinuous-v0": ["position", "velocity"],
    "Acrobot-v1": ["theta1", "theta2", "dtheta1", "dtheta2"],
}
# Gymnasium integrates in float64, jaxsim in float32; RK4 over 0.2 s (Acrobot) loosens most.
TOL = {"Acrobot-v1": dict(rtol=1e-4, atol=1e-5)}


def _random_states(env_id, rng, n):
    """States spread over (and a little past) the region an episode visits."""
    u = lambda lo, hi: rng.uniform(lo, hi, n)  # noqa: E731
    return {
        "CartPole-v1": [u(-2.4, 2.4), u(-3, 3), u(-0.21, 0.21), u(-3, 3)],
        "Pendulum-v1": [u(-4 * np.pi, 4 * np.pi), u(-8, 8)],
        "MountainCar-v0": [u(-1.2, 0.6), u(-0.07, 0.07)],
        "MountainCarContinuous-v0": [u(-1.2, 0.6), u(-0.07, 0.07)],
        "Acrobot-v1": [
            u(-np.pi, np.pi),
            u(-np.pi, np.pi),
            u(-4 * np.pi, 4 * np.pi),
            u(-9 * np.pi, 9 * np.pi),
        ],
    }[env_id]


def _gym_action(space, a):
    return int(a) if isinstance(space, Discrete) else np.asarray(a, np.float32)


def _actions(env, rng, n):
    space = env.action_space(env.default_params)
    if isinstance(space, Discrete):
        return rng.integers(0, space.n, n).astype(np.int32)
    # Include actions beyond the bounds: both sides must clip (and charge) them the same way.
    return rng.uniform(1.5 * space.low, 1.5 * space.high, (n, *space.shape)).astype(np.float32)


def _jax_state(env, values, time):
    fields = dict(zip(GYM_STATE[env.id], (jnp.float32(v) for v in values), strict=True))
    return env.state_type(**fields, time=jnp.int32(time))


@pytest.mark.parametrize("env_id", CLASSIC)
def test_single_steps_from_random_states_match_gymnasium(env_id):
    env = jaxsim.make(env_id)
    params = env.default_params
    genv = gym.make(env_id).unwrapped
    genv.reset(seed=0)
    rng = np.random.default_rng(0)
    n = 300
    states = np.stack(_random_states(env_id, rng, n), -1).astype(np.float32)
    actions = _actions(env, rng, n)
    step = jax.jit(env.step)
    space = env.action_space(params)
    for s, a in zip(states, actions, strict=True):
        genv.state = s.astype(np.float64)
        if env_id == "CartPole-v1":
            genv.steps_beyond_terminated = None
        g_obs, g_rew, g_term, g_trunc, _ = genv.step(_gym_action(space, a))
        _, ts = step(KEY, _jax_state(env, s, 0), jnp.asarray(a), params)
        np.testing.assert_allclose(ts.obs, g_obs, **TOL.get(env_id, dict(rtol=1e-5, atol=1e-6)))
        np.testing.assert_allclose(ts.reward, g_rew, rtol=1e-5, atol=1e-5)
        assert bool(ts.terminated) == g_term
        assert not bool(ts.truncated)


@pytest.mark.parametrize("env_id", CLASSIC)
def test_whole_episodes_match_gymnasium_including_truncation(env_id):
    env = jaxsim.make(env_id)
    params = env.default_params
    space = env.action_space(params)
    genv = gym.make(env_id)  # with Gymnasium's TimeLimit
    assert genv.spec.max_episode_steps == params.max_episode_steps
    step = jax.jit(env.step)
    rng = np.random.default_rng(1)
    for episode in range(2):
        genv.reset(seed=episode)
        t, done = 0, False
        while not done:
            # Re-sync: Gymnasium's float64 state, rounded to float32, is where both step from.
            g_state = np.asarray(genv.unwrapped.state, np.float64)
            a = _actions(env, rng, 1)[0]
            g_obs, g_rew, g_term, g_trunc, _ = genv.step(_gym_action(space, a))
            _, ts = step(KEY, _jax_state(env, g_state, t), jnp.asarray(a), params)
            t += 1
            np.testing.assert_allclose(ts.obs, g_obs, **TOL.get(env_id, dict(rtol=1e-5, atol=1e-6)))
            np.testing.assert_allclose(ts.reward, g_rew, rtol=1e-5, atol=1e-5)
            assert (bool(ts.terminated), bool(ts.truncated)) == (g_term, g_trunc), t
            done = g_term or g_trunc
        assert t <= params.max_episode_steps


def test_cartpole_truncates_like_time_limit():
    # A random policy rarely lasts 500 steps, so shorten the limit on both sides.
    env = jaxsim.make("CartPole-v1", max_episode_steps=5)
    genv = gym.make("CartPole-v1", max_episode_steps=5)
    genv.reset(seed=3)
    state = _jax_state(env, genv.unwrapped.state, 0)
    for t in range(5):
        _, _, g_term, g_trunc, _ = genv.step(t % 2)
        state, ts = env.step(KEY, state, jnp.int32(t % 2), env.default_params)
        assert (bool(ts.terminated), bool(ts.truncated)) == (g_term, g_trunc)
    assert g_trunc


@pytest.mark.parametrize("env_id", CLASSIC)
def test_reset_distribution_matches_gymnasium(env_id):
    env = jaxsim.make(env_id)
    params = env.default_params
    genv = gym.make(env_id).unwrapped
    g = np.stack([np.asarray(genv.reset(seed=s)[0]) for s in range(400)])
    _, obs = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(KEY, 4000), params)
    obs = np.asarray(obs)
    # Same support (the bounds of a uniform) and roughly the same mean, per component.
    scale = np.ptp(g, 0) + 1e-3
    assert np.all(np.abs(obs.min(0) - g.min(0)) <= 0.03 * scale), (obs.min(0), g.min(0))
    assert np.all(np.abs(obs.max(0) - g.max(0)) <= 0.03 * scale), (obs.max(0), g.max(0))
    assert np.all(np.abs(obs.mean(0) - g.mean(0)) <= 0.1 * scale), (obs.mean(0), g.mean(0))
