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
from test_gymnasium_vector import _vec  # noqa: E402

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
# importing changes no JAX setting (checked before JAX's first computation), the clean import,
# then each case with the modules it stubs, purged before the next; last, cpu_dispatch(sync=True)
# once JAX's CPU client has started (it has by then), from a fresh import of jaxsim.gymnasium.
_IMPORT_CASES = """
import json, sys, types
out = {}
import jax
before = jax.config.read('jax_cpu_enable_async_dispatch')
import jaxsim.gymnasium, gymnasium
out['dispatch_unchanged'] = jax.config.read('jax_cpu_enable_async_dispatch') == before
out['dispatch_default'] = str(jaxsim.gymnasium.cpu_dispatch())
gymnasium.make('jaxsim/CartPole-v1')
out['clean'] = sorted(
    m for m in ('gymnax', 'brax', 'stable_baselines3', 'torch') if m in sys.modules
)

def purge():
    for name in list(sys.modules):
        if name.split('.')[0] == 'gymnasium' or name.startswith('jaxsim.gymnasium'):
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
jax.numpy.zeros(1)  # JAX's CPU client has started
import jaxsim.gymnasium as g  # a fresh import (purged above): nothing set through it yet
try:
    g.cpu_dispatch(sync=True)
    out['late_sync'] = ''
except RuntimeError as e:
    out['late_sync'] = str(e)
out['late_report'] = str(g.cpu_dispatch())
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
        key = jax.random.split(key)[1] if jax_env.step_uniform_shapes() else KEY
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


def test_importing_changes_no_jax_setting_and_sync_dispatch_is_an_opt_in(import_cases):
    # The flag is process-wide and read once, when the CPU client starts: the opt-in needs a
    # process whose client has not started; the import and late-call cases share import_cases'.
    assert import_cases["dispatch_unchanged"] is True
    assert import_cases["dispatch_default"].startswith(
        "{'async': True, 'reason': \"JAX's setting: jaxsim.gymnasium changes it only"
    )
    assert import_cases["late_sync"].startswith(
        "cpu_dispatch(sync=True): JAX has started its CPU client, which read "
        "jax_cpu_enable_async_dispatch=True once; call it before JAX's first computation"
    )
    assert import_cases["late_report"].startswith("{'async': True,")
    flag = "'jax_cpu_enable_async_dispatch'"
    show = "print(g.cpu_dispatch()); "
    source = (
        f"import jax, jaxsim.gymnasium as g; print(g.cpu_dispatch(sync=True)); "
        f"jax.numpy.zeros(1); {show}jax.config.update({flag}, True); {show}"
    )
    wanted = [
        "{'async': False, 'reason': 'set by cpu_dispatch(sync=True)'}",
        "{'async': False, 'reason': 'set by cpu_dispatch(sync=True)'}",
        "{'async': True, 'reason': 'changed with jax.config.update after set by",
    ]
    out = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == len(wanted), out.stdout
    for line, start in zip(lines, wanted, strict=True):
        assert line.startswith(start), line


def test_the_front_benchmark_checks_transitions_before_timing():
    from benchmarks.front.measure import check_front_transitions

    check = check_front_transitions(8, steps=30)
    assert check["pass"] and check["transitions_compared"] > 200
