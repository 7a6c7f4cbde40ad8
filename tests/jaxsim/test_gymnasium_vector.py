"""The Gymnasium vector front (`jaxsim.gymnasium.make_vec`): spaces, auto-reset modes, seeds,
per-environment params and reset_mask."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim

gym = pytest.importorskip("gymnasium")

from gymnasium.vector import AutoresetMode  # noqa: E402

import jaxsim.gymnasium as jgym  # noqa: E402 (after the importorskip)

KEY = jax.random.key(0)


def _vec(env_id, num_envs, mode=AutoresetMode.NEXT_STEP, **kwargs):
    return gym.make_vec(
        jgym.gym_id(env_id),
        num_envs=num_envs,
        vectorization_mode="vector_entry_point",
        autoreset_mode=mode,
        **kwargs,
    )


def _cartpole_state(env, obs, time=0):
    """CartPole's observation is its state (x, x_dot, theta, theta_dot)."""
    x, x_dot, theta, theta_dot = (jnp.float32(v) for v in obs)
    return env.state_type(x=x, x_dot=x_dot, theta=theta, theta_dot=theta_dot, time=jnp.int32(time))


# ------------------------------------------------------------------------------------ vector env
@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
@pytest.mark.parametrize("env_id", ["CartPole-v1", "MountainCarContinuous-v0"])
def test_vector_env_spaces_shapes_and_dtypes(env_id, mode):
    venv = _vec(env_id, 5, mode)
    assert isinstance(venv, gym.vector.VectorEnv) and isinstance(venv, jgym.JaxsimVectorEnv)
    assert venv.metadata["autoreset_mode"] == mode and venv.autoreset_mode == mode
    assert venv.num_envs == 5
    single = gym.make(jgym.gym_id(env_id))
    assert venv.single_observation_space == single.observation_space
    assert venv.single_action_space == single.action_space
    obs, info = venv.reset(seed=0)
    assert obs.shape == (5, *single.observation_space.shape) and obs.dtype == np.float32
    assert info == {} and venv.observation_space.contains(obs)
    venv.action_space.seed(0)
    obs, reward, terminated, truncated, info = venv.step(venv.action_space.sample())
    assert obs.shape == (5, *single.observation_space.shape) and obs.dtype == np.float32
    assert reward.shape == (5,) and reward.dtype == np.float32
    assert terminated.shape == truncated.shape == (5,)
    assert terminated.dtype == truncated.dtype == np.bool_
    assert isinstance(info, dict)


def _random_cartpole_run(mode, steps=80, num_envs=6):
    venv = _vec("CartPole-v1", num_envs, mode)
    obs, _ = venv.reset(seed=1)
    rng = np.random.default_rng(1)
    records = []
    for _ in range(steps):
        actions = rng.integers(0, 2, num_envs)  # int64, as Gymnasium samples them
        out = venv.step(actions)
        records.append((obs, actions, *out))
        obs = out[0]
    return records


def test_next_step_defers_the_reset_by_one_step():
    env = jaxsim.make("CartPole-v1")
    step = jax.jit(jax.vmap(env.step, in_axes=(None, 0, 0, None)))
    pending = None
    dones = 0
    for obs, actions, next_obs, reward, terminated, truncated, info in _random_cartpole_run(
        AutoresetMode.NEXT_STEP
    ):
        assert info == {}
        if pending is not None:
            # Lanes that ended last step: the reset observation, reward 0, no flags. Their
            # physics did not advance: the next step is checked to start from this observation.
            assert np.all(reward[pending] == 0)
            assert not np.any(terminated[pending] | truncated[pending])
            assert np.all(np.abs(next_obs[pending]) <= 0.05)  # CartPole's reset range
        # Every other lane made one jaxsim step from the previous observation (its state).
        live = ~pending if pending is not None else np.ones(len(actions), bool)
        states = jax.vmap(lambda o: _cartpole_state(env, o))(jnp.asarray(obs))
        _, ts = step(KEY, states, jnp.asarray(actions, jnp.int32), env.default_params)
        np.testing.assert_array_equal(next_obs[live], np.asarray(ts.obs)[live])
        np.testing.assert_array_equal(reward[live], 1.0)
        np.testing.assert_array_equal(terminated[live], np.asarray(ts.terminated)[live])
        pending = terminated | truncated
        dones += pending.sum()
    assert dones >= 6  # random CartPole episodes last ~22 steps: several ends were checked


def test_same_step_returns_the_reset_and_puts_the_final_obs_in_info():
    env = jaxsim.make("CartPole-v1")
    step = jax.jit(jax.vmap(env.step, in_axes=(None, 0, 0, None)))
    dones = 0
    for obs, actions, next_obs, reward, terminated, truncated, info in _random_cartpole_run(
        AutoresetMode.SAME_STEP
    ):
        states = jax.vmap(lambda o: _cartpole_state(env, o))(jnp.asarray(obs))
        _, ts = step(KEY, states, jnp.asarray(actions, jnp.int32), env.default_params)
        true_next = np.asarray(ts.obs)
        done = terminated | truncated
        np.testing.assert_array_equal(reward, 1.0)
        np.testing.assert_array_equal(terminated, np.asarray(ts.terminated))
        np.testing.assert_array_equal(next_obs[~done], true_next[~done])
        if not done.any():
            assert info == {}
            continue
        dones += done.sum()
        assert set(info) == {"final_obs", "_final_obs", "final_info", "_final_info"}
        np.testing.assert_array_equal(info["_final_obs"], done)
        np.testing.assert_array_equal(info["_final_info"], done)
        assert info["final_obs"].dtype == object and info["final_obs"].shape == (len(done),)
        for i in range(len(done)):
            if done[i]:
                np.testing.assert_array_equal(info["final_obs"][i], true_next[i])
                assert np.all(np.abs(next_obs[i]) <= 0.05)  # already reset
            else:
                assert info["final_obs"][i] is None
    assert dones >= 6


def test_both_modes_see_the_same_episodes():
    # Same seed and actions: NEXT_STEP is SAME_STEP with one extra (ignored) step per reset.
    # Both draw the first reset at the step that ended the first episode; later resets are
    # drawn one step count apart, so the comparison stops at the second episode's end.
    venvs = {
        mode: _vec("CartPole-v1", 1, mode) for mode in AutoresetMode if mode.name != "DISABLED"
    }
    for venv in venvs.values():
        venv.reset(seed=3)
    same = venvs[AutoresetMode.SAME_STEP]
    nxt = venvs[AutoresetMode.NEXT_STEP]
    episodes = 0
    for _ in range(60):
        s_obs, _, s_term, s_trunc, s_info = same.step(np.zeros(1, np.int64))
        n_obs, _, n_term, n_trunc, _ = nxt.step(np.zeros(1, np.int64))
        assert (s_term, s_trunc) == (n_term, n_trunc)
        if s_term[0] or s_trunc[0]:
            np.testing.assert_array_equal(s_info["final_obs"][0], n_obs[0])
            episodes += 1
            if episodes == 2:
                break
            n_obs = nxt.step(np.zeros(1, np.int64))[0]  # the deferred reset
        np.testing.assert_array_equal(s_obs, n_obs)
    assert episodes == 2


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_vector_reset_seed_reproduces_and_a_plain_reset_continues(mode):
    def run(venv, seed):
        obs = [venv.reset(seed=seed)[0]]
        obs += [venv.step(np.ones(4, np.int64))[0] for _ in range(30)]
        return np.stack(obs)

    venv = _vec("CartPole-v1", 4, mode)
    first = run(venv, 5)
    np.testing.assert_array_equal(run(_vec("CartPole-v1", 4, mode), 5), first)
    again = run(venv, None)
    assert not np.array_equal(again[0], first[0])
    assert not np.array_equal(run(venv, 6)[0], first[0])
    # Each environment draws its own reset.
    assert len({tuple(o) for o in first[0]}) == 4


def test_vector_env_checks_its_arguments():
    for mode in (AutoresetMode.DISABLED, "same_step"):
        with pytest.raises(ValueError, match=r"autoreset_mode must be AutoresetMode.NEXT_STEP or"):
            _vec("CartPole-v1", 2, mode)
    venv = _vec("CartPole-v1", 2)
    venv.reset(seed=0)
    with pytest.raises(ValueError, match=r"actions must have shape \(2,\)"):
        venv.step(np.zeros(3, np.int64))
    with pytest.raises(ValueError, match=r"integers in \[0, 2\)"):
        venv.step(np.array([0, 5]))


# ------------------------------------------------------------- per-environment params, reset_mask
def _step_from_obs(env, obs, actions, params, params_axes=None):
    """jaxsim's own vmapped CartPole step from the states a batch of observations shows."""
    states = jax.vmap(lambda o: _cartpole_state(env, o))(jnp.asarray(obs))
    step = jax.vmap(env.step, in_axes=(None, 0, 0, params_axes))
    return step(KEY, states, jnp.asarray(actions, jnp.int32), params)[1]


def test_per_environment_params_reach_each_lane():
    env = jaxsim.make("CartPole-v1")
    params = env.default_params.replace(
        force_mag=np.array([2.0, 5.0, 10.0], np.float32), max_episode_steps=np.array([3, 5, 7])
    )
    venv = _vec("CartPole-v1", 3, AutoresetMode.SAME_STEP, params=params)
    obs, _ = venv.reset(seed=0)
    axes = env.params_axes(params, 3)
    truncated_at = {}
    for t in range(1, 8):
        actions = np.full(3, t % 2)  # alternating pushes: the poles stay up
        ts = _step_from_obs(env, obs, actions, params, axes)
        obs, _, terminated, truncated, info = venv.step(actions)
        final = np.stack([info["final_obs"][i] if truncated[i] else obs[i] for i in range(3)])
        # Each lane its own force; the two programs may contract floats differently (1 ulp).
        np.testing.assert_allclose(final, np.asarray(ts.obs), rtol=1e-6, atol=1e-7)
        assert not terminated.any()
        truncated_at.update({i: t for i in np.flatnonzero(truncated) if i not in truncated_at})
    assert truncated_at == {0: 3, 1: 5, 2: 7}


def test_params_of_the_wrong_size_type_or_value_name_the_field():
    env = jaxsim.make("CartPole-v1")
    with pytest.raises(ValueError, match=r"field 'force_mag' has shape \(4,\).*num_envs=3"):
        _vec("CartPole-v1", 3, params=env.default_params.replace(force_mag=np.ones(4)))
    limits = np.array([5, 0, 5], np.int32)
    # make_vec's params meet rollout's checks first (jaxsim.params.batch_axes), naming the env.
    with pytest.raises(ValueError, match=r"params.*: max_episode_steps of environment 1 .*>= 1"):
        _vec("CartPole-v1", 3, params=env.default_params.replace(max_episode_steps=limits))
    with pytest.raises(TypeError, match="max_episode_steps of environment 0 must be an integer"):
        _vec("CartPole-v1", 3, params=env.default_params.replace(max_episode_steps=np.ones(3)))
    with pytest.raises(TypeError, match="params must be CartPoleParams"):
        _vec("CartPole-v1", 3, params=jaxsim.make("Pendulum-v1").default_params)


def test_params_sampler_draws_every_episode_its_own_values():
    env = jaxsim.make("Pendulum-v1")  # never terminates: the drawn limit sets each length
    sampler = jaxsim.uniform_params(env, max_episode_steps=(2, 6))
    venv = _vec("Pendulum-v1", 4, AutoresetMode.SAME_STEP, params_sampler=sampler)

    def lengths(seed):
        venv.reset(seed=seed)
        since, out = np.zeros(4, int), []
        for _ in range(40):
            since += 1
            truncated = venv.step(np.zeros((4, 1), np.float32))[3]
            out += list(since[truncated])
            since[truncated] = 0
        return out

    first = lengths(0)
    assert set(first) <= set(range(2, 7)) and len(set(first)) >= 3
    assert lengths(0) == first  # reproducible from the seed
    with pytest.raises(ValueError, match=r"draws \['gravity'\], which are not params"):
        _vec(
            "Pendulum-v1",
            4,
            params_sampler=jaxsim.uniform_params(jaxsim.make("CartPole-v1"), gravity=(9.0, 10.0)),
        )


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_reset_mask_restarts_only_the_masked_lanes(mode):
    venv = _vec("Pendulum-v1", 4, mode, max_episode_steps=6)
    full = venv.reset(seed=9)[0]
    zeros = np.zeros((4, 1), np.float32)
    for _ in range(4):
        obs = venv.step(zeros)[0]
    mask = np.array([True, False, True, False])
    obs_after, info = venv.reset(seed=9, options={"reset_mask": mask})
    assert info == {}
    np.testing.assert_array_equal(obs_after[mask], full[mask])  # as a full reset with seed 9
    np.testing.assert_array_equal(obs_after[~mask], obs[~mask])  # the others run on
    truncs = [venv.step(zeros)[3] for _ in range(6)]
    assert [t for t, tr in enumerate(truncs, 1) if tr[1]] == [2]  # their clock ran on too
    assert [t for t, tr in enumerate(truncs, 1) if tr[0]] == [6]  # a new episode's clock


def test_reset_mask_clears_a_deferred_reset():
    venv = _vec("CartPole-v1", 2, max_episode_steps=3)
    venv.reset(seed=0)
    for _ in range(3):  # both truncate at step 3; NEXT_STEP shows their resets next
        venv.step(np.array([0, 1]))
    venv.reset(options={"reset_mask": np.array([True, False])})
    _, reward, *_ = venv.step(np.array([0, 1]))
    assert reward.tolist() == [1.0, 0.0]  # lane 0 stepped its new episode; lane 1 its reset


def test_reset_mask_is_checked():
    venv = _vec("CartPole-v1", 3)
    with pytest.raises(gym.error.ResetNeeded, match="reset without a reset_mask first"):
        venv.reset(options={"reset_mask": np.ones(3, bool)})
    venv.reset(seed=0)
    bad = {
        "a bool array of shape \\(3,\\), got int64\\[3\\]": np.ones(3, np.int64),
        "a bool array of shape \\(3,\\), got bool\\[4\\]": np.ones(4, bool),
        "selects no environment": np.zeros(3, bool),
    }
    for message, mask in bad.items():
        with pytest.raises(ValueError, match=message):
            venv.reset(options={"reset_mask": mask})
    with pytest.raises(ValueError, match=r"unsupported reset options \['other'\]"):
        venv.reset(options={"other": 1})
