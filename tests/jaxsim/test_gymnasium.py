"""Gymnasium interop: registration, single and vector envs (SB3's VecEnv: test_sb3.py)."""

import dataclasses
import json
import pickle
import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim

gym = pytest.importorskip("gymnasium")

from gymnasium.utils.env_checker import check_env  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

import jaxsim.gymnasium as jgym  # noqa: E402 (after the importorskip)

# MinAtar's -v0 and -v1 ids differ only in their action set, which test_minatar.py covers:
# one id per game here keeps these per-environment tests' compiles down.
IDS = [i for i in jaxsim.registered_ids() if not (i.startswith("MinAtar/") and i.endswith("-v0"))]
# The native ids Gymnasium has too: their specs and spaces must equal Gymnasium's own.
GYM_IDS = [env_id for env_id in IDS if env_id in gym.registry]
KEY = jax.random.key(0)
# Gymnasium's checker recommends a [-1, 1] Box action space; Gymnasium's own Pendulum and
# MountainCarContinuous draw the same recommendation, and Gymnasium's CartPole the same remark on
# its infinite velocity bounds. Any other warning fails the test.
ADVICE = ("symmetric and normalized space", "value is -infinity", "value is infinity")


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


# --------------------------------------------------------------------------------- registration
def test_every_id_registers_jaxsims_limit_and_gymnasiums_threshold():
    assert len(GYM_IDS) == 5
    for env_id in jaxsim.registered_ids():
        spec = gym.spec(jgym.gym_id(env_id))
        limit = int(jaxsim.make(env_id).default_params.max_episode_steps)
        limit = None if limit == 2**31 - 1 else limit  # MinAtar's games: no limit, no TimeLimit
        assert spec.max_episode_steps == limit
        theirs = gym.spec(env_id) if env_id in GYM_IDS else None
        assert spec.reward_threshold == (theirs and theirs.reward_threshold)
        assert spec.vector_entry_point is not None
        assert spec.kwargs == {"env_id": env_id}
        made = gym.make(jgym.gym_id(env_id)).spec  # what code (SB3, rl-zoo) reads
        assert (made.max_episode_steps, made.reward_threshold) == (
            spec.max_episode_steps,
            spec.reward_threshold,
        )
    for env_id in GYM_IDS:  # CartPole: 500 and 475, as Gymnasium's
        ours, theirs = gym.spec(jgym.gym_id(env_id)), gym.spec(env_id)
        assert ours.max_episode_steps == theirs.max_episode_steps
    assert jgym.register_all() == [jgym.gym_id(i) for i in jaxsim.registered_ids()]  # idempotent


# One process for the import checks below (each was a process of its own, an import of jax each):
# the clean import first, then each case with the modules it stubs, purged before the next.
_IMPORT_CASES = """
import json, sys, types
out = {}
import jaxsim.gymnasium, gymnasium
gymnasium.make('jaxsim/CartPole-v1')
out['clean'] = sorted(
    m for m in ('gymnax', 'brax', 'stable_baselines3', 'torch') if m in sys.modules
)

def purge():
    for name in list(sys.modules):
        if name.split('.')[0] == 'gymnasium' or name.startswith(('jaxsim.gymnasium', 'jaxsim.sb3')):
            del sys.modules[name]

def error(case, stubs, statement):
    purge()
    sys.modules.update(stubs)
    try:
        exec(statement)
        out[case] = ''
    except ImportError as e:
        out[case] = str(e)
    for name in stubs:
        sys.modules.pop(name, None)
    purge()

# Gymnasium 0.29 stands in: a module of that version whose vector package lacks the name.
gym, vector = types.ModuleType('gymnasium'), types.ModuleType('gymnasium.vector')
gym.__version__, gym.vector, gym.__path__ = '0.29.1', vector, []
error('gym029', {'gymnasium': gym, 'gymnasium.vector': vector}, 'import jaxsim.gymnasium')
# None in sys.modules makes an import fail as if the package were not installed.
error('no_gym', {'gymnasium': None}, 'import jaxsim.gymnasium')
error(
    'no_sb3',
    {'stable_baselines3': None},
    "import jaxsim.gymnasium as g; g.make_sb3_vec_env('CartPole-v1')",
)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def import_cases():
    run = subprocess.run([sys.executable, "-c", _IMPORT_CASES], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_importing_does_not_import_gymnax_brax_or_sb3(import_cases):
    assert import_cases["clean"] == []


def test_a_gymnasium_without_autoresetmode_is_refused_naming_the_version_needed(import_cases):
    message = import_cases["gym029"]
    assert "needs Gymnasium >= 1.1, < 2" in message, message
    assert "found 0.29.1" in message and "jaxsim-rl[gymnasium]" in message


def test_missing_optional_dependencies_name_what_to_install(import_cases):
    for case, extra in (("no_gym", "jaxsim-rl[gymnasium]"), ("no_sb3", "jaxsim-rl[sb3]")):
        assert extra in import_cases[case], import_cases[case]


# ------------------------------------------------------------------------------------ single env
def _unbounded(x):
    """float32's largest magnitude (jaxsim's native "no bound") as +-inf (Gymnasium's)."""
    return np.where(np.abs(x) == np.finfo(np.float32).max, np.copysign(np.inf, x), x)


@pytest.mark.parametrize("env_id", IDS)
def test_single_env_passes_check_env_with_matching_spaces(env_id):
    env = gym.make(jgym.gym_id(env_id))
    # One TimeLimit, with jaxsim's limit: gymnasium.make applies it, as for its own ids.
    limits = [w._max_episode_steps for w in _wrappers(env) if isinstance(w, gym.wrappers.TimeLimit)]
    limit = int(jaxsim.make(env_id).default_params.max_episode_steps)
    assert limits == ([] if limit == 2**31 - 1 else [limit])
    jax_env = jaxsim.make(env_id)
    obs_space = jax_env.observation_space(jax_env.default_params)
    act_space = jax_env.action_space(jax_env.default_params)
    assert env.observation_space.shape == obs_space.shape
    assert env.observation_space.dtype == np.dtype(obs_space.dtype)  # float32; MinAtar: bool
    np.testing.assert_array_equal(env.observation_space.low, _unbounded(obs_space.low))
    np.testing.assert_array_equal(env.observation_space.high, _unbounded(obs_space.high))
    if isinstance(act_space, jaxsim.Discrete):
        assert env.action_space == gym.spaces.Discrete(act_space.n)
    else:
        assert env.action_space == gym.spaces.Box(
            act_space.low, act_space.high, act_space.shape, np.float32
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped, skip_render_check=True)
    advice = [any(a in str(w.message) for a in ADVICE) for w in caught]
    assert all(advice), [str(w.message) for w in caught]


def _wrappers(env):
    while isinstance(env, gym.Wrapper):
        yield env
        env = env.env


@pytest.mark.parametrize("env_id", GYM_IDS)
def test_spaces_equal_gymnasiums_exactly(env_id):
    # Bounds element for element (CartPole's velocities: +-inf, not +-float32 max), dtypes too.
    ours, theirs = gym.make(jgym.gym_id(env_id)), gym.make(env_id)
    venv = _vec(env_id, 2)
    for space in (ours.observation_space, venv.single_observation_space):
        assert (space.shape, space.dtype) == (theirs.observation_space.shape, np.float32)
        np.testing.assert_array_equal(space.low, theirs.observation_space.low)
        np.testing.assert_array_equal(space.high, theirs.observation_space.high)
    assert ours.action_space == theirs.action_space == venv.single_action_space
    if isinstance(theirs.action_space, gym.spaces.Box):
        np.testing.assert_array_equal(ours.action_space.low, theirs.action_space.low)
        np.testing.assert_array_equal(ours.action_space.high, theirs.action_space.high)


@pytest.mark.parametrize("env_id", IDS)
def test_single_env_steps_equal_jaxsims_step(env_id):
    genv = gym.make(jgym.gym_id(env_id), max_episode_steps=25)
    jax_env = jaxsim.make(env_id, max_episode_steps=25)
    params = jax_env.default_params
    step = jax.jit(jax_env.step)
    obs, info = genv.reset(seed=0)
    assert obs.dtype == genv.observation_space.dtype and obs.shape == genv.observation_space.shape
    assert info == {}
    state = genv.unwrapped._state
    genv.action_space.seed(0)
    for t in range(1, 31):
        action = genv.action_space.sample()  # int64 for Discrete: accepted
        # Dynamics that draw (MinAtar's sticky actions) get the key the front splits for them.
        key = genv.unwrapped._programs.unpack(genv.unwrapped._words)[1]
        key = jax.random.split(key)[1] if jax_env.num_step_uniforms else KEY
        obs, reward, terminated, truncated, _ = genv.step(action)
        state, ts = step(key, state, jnp.asarray(action).astype(act_dtype(jax_env)), params)
        np.testing.assert_array_equal(obs, np.asarray(ts.obs))
        assert obs.dtype == np.asarray(ts.obs).dtype == genv.observation_space.dtype
        assert isinstance(reward, float) and reward == float(ts.reward)
        assert (terminated, truncated) == (bool(ts.terminated), bool(ts.truncated))
        assert truncated == (t == 25)  # jaxsim's limit, applied once
        if terminated or truncated:
            break
    assert terminated or truncated


def act_dtype(env):
    return env.action_space(env.default_params).dtype


def test_single_env_reset_seeds_reproduce_and_a_plain_reset_continues():
    env = gym.make("jaxsim/Acrobot-v1")
    first = env.reset(seed=7)[0]
    np.testing.assert_array_equal(env.reset(seed=7)[0], first)
    second = env.reset()[0]
    assert not np.array_equal(second, first)
    env.reset(seed=7)
    np.testing.assert_array_equal(env.reset()[0], second)  # the stream after seed 7, again


def test_single_env_rejects_an_invalid_discrete_action():
    env = gym.make("jaxsim/CartPole-v1")
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"integers in \[0, 2\)"):
        env.step(2)


def test_single_env_refuses_reset_options_instead_of_dropping_them():
    env = gym.make("jaxsim/CartPole-v1")
    env.reset(seed=0, options={})  # none given: fine (Gymnasium's checker passes {})
    with pytest.raises(ValueError, match=r"reset takes no options, got \['low'\]"):
        env.reset(seed=0, options={"low": -0.1})


def test_both_envs_pickle_and_continue_where_they_stopped():
    for make in (lambda: gym.make("jaxsim/Acrobot-v1"), lambda: _vec("Acrobot-v1", 3)):
        env = make()
        env.reset(seed=4)
        action = env.action_space.sample()
        for _ in range(5):
            env.step(action)
        copy = pickle.loads(pickle.dumps(env))
        for _ in range(5):
            for ours, theirs in zip(env.step(action)[:4], copy.step(action)[:4], strict=True):
                np.testing.assert_array_equal(ours, theirs)


def test_cartpole_matches_gymnasiums_cartpole():
    env = gym.make("jaxsim/CartPole-v1")
    genv = gym.make("CartPole-v1").unwrapped
    genv.reset(seed=0)
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    steps = 0
    for _ in range(100):
        # Sync Gymnasium's float64 state to ours, as test_envs.py does; then both step.
        genv.state = np.asarray(obs, np.float64)
        genv.steps_beyond_terminated = None
        action = int(rng.integers(0, 2))
        g_obs, g_rew, g_term, g_trunc, _ = genv.step(action)
        obs, reward, terminated, truncated, _ = env.step(action)
        np.testing.assert_allclose(obs, g_obs, rtol=1e-5, atol=1e-6)
        assert (reward, terminated, truncated) == (g_rew, g_term, g_trunc)
        steps += 1
        if terminated:
            obs, _ = env.reset()
    assert steps == 100


@pytest.mark.parametrize("limit", [7, 230])  # below and above Pendulum's default, 200
@pytest.mark.parametrize("how", ["gymnasium.make", "jaxsim.gymnasium.make", "vector", "sync"])
def test_max_episode_steps_truncates_there_above_or_below_the_default(how, limit):
    # Pendulum never terminates: truncation alone ends its episodes.
    if how in ("vector", "sync"):  # jaxsim's vector env; Gymnasium's over single envs
        mode = "vector_entry_point" if how == "vector" else how
        env = gym.make_vec(
            "jaxsim/Pendulum-v1", 2, vectorization_mode=mode, max_episode_steps=limit
        )
        action = np.zeros((2, 1), np.float32)
    else:
        make = gym.make if how == "gymnasium.make" else jgym.make
        env = make("jaxsim/Pendulum-v1", max_episode_steps=limit)
        action = np.zeros(1, np.float32)
        assert env.spec.max_episode_steps == limit
    env.reset(seed=0)
    steps = 1
    while not np.all(env.step(action)[3]):  # the first truncation
        steps += 1
        assert steps <= limit
    assert steps == limit


def test_make_checks_max_episode_steps():
    for bad in (0, -2, 2.5, True, 2**31):
        with pytest.raises(ValueError, match=r"max_episode_steps must be an int in \[1, 2\*\*31"):
            jgym.make("CartPole-v1", max_episode_steps=bad)


def test_a_limit_in_a_hand_made_specs_kwargs_is_refused_not_dropped():
    spec = gym.spec("jaxsim/CartPole-v1")
    spec = dataclasses.replace(spec, kwargs={**spec.kwargs, "max_episode_steps": 5})
    with pytest.raises(TypeError, match="give max_episode_steps to gymnasium.make"):
        gym.make(spec)


def test_max_episode_steps_minus_one_runs_without_a_limit():
    env = gym.make("jaxsim/Pendulum-v1", max_episode_steps=-1)  # Gymnasium's "no TimeLimit"
    assert not any(isinstance(w, gym.wrappers.TimeLimit) for w in _wrappers(env))
    env.reset(seed=0)
    assert not any(env.step(np.zeros(1, np.float32))[3] for _ in range(210))


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "MountainCar-v0"])
def test_truncation_happens_once_at_max_episode_steps(env_id):
    # Neither terminates under these actions before the limit: truncation alone ends them.
    env = gym.make(jgym.gym_id(env_id))
    limit = jaxsim.make(env_id).default_params.max_episode_steps
    env.reset(seed=0)
    action = np.zeros(env.action_space.shape, np.float32) if env_id == "Pendulum-v1" else 1
    flags = [env.step(action)[2:4] for _ in range(limit)]
    assert [t for t, (_, trunc) in enumerate(flags, 1) if trunc] == [limit]
    assert not any(term for term, _ in flags)
    venv = _vec(env_id, 2, max_episode_steps=9)
    venv.reset(seed=0)
    actions = np.stack([action] * 2)
    truncs = [venv.step(actions)[3] for _ in range(9)]
    assert [t for t, tr in enumerate(truncs, 1) if tr.all()] == [9]
    assert not any(tr.any() for tr in truncs[:-1])


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


def test_importing_turns_async_cpu_dispatch_off_only_before_jax_starts():
    # The flag is process-wide and read once, when the CPU client starts: a process per case.
    # The first also turns it back on after the import, the documented way out.
    show = "print(g.cpu_dispatch()); "
    way_out = "import jax; jax.config.update('jax_cpu_enable_async_dispatch', True); "
    cases = {
        f"import jaxsim.gymnasium as g; {show}{way_out}{show}": [
            (False, "turned off by importing"),
            (True, "turned on again after jaxsim.gymnasium was imported"),
        ],
        "import jax; jax.numpy.zeros(1); import jaxsim.gymnasium as g; print(g.cpu_dispatch())": [
            (True, "left on: JAX had started")
        ],
    }
    for source, wanted in cases.items():
        out = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.strip().splitlines()
        assert len(lines) == len(wanted), out.stdout
        for line, (on, reason) in zip(lines, wanted, strict=True):
            assert f"'async': {on}" in line and reason in line, line


def test_the_front_benchmark_checks_transitions_before_timing():
    from benchmarks.gymnasium_front import check_front_transitions

    check = check_front_transitions(8, steps=30)
    assert check["pass"] and check["transitions_compared"] > 200
