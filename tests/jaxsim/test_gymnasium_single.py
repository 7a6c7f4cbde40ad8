"""The single Gymnasium env's packed step: same transitions as before, one call, checked actions."""

import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim

gym = pytest.importorskip("gymnasium")

from gymnasium.utils.seeding import np_random  # noqa: E402

import jaxsim.gymnasium  # noqa: E402 (registers jaxsim/<id>)
from jaxsim.gymnasium import step as gymnasium_step  # noqa: E402
from jaxsim.gymnasium.vector import seed_words  # noqa: E402


def _reference_episode(env_id, seed, actions, params_at=None, **kwargs):
    """What the front returned before its step was packed: one jitted reset, then per step a
    key split and a jitted env.step, each output read back on its own."""
    env = jaxsim.make(env_id, **kwargs)
    params = env.default_params
    rng, _ = np_random(seed)
    key = seed_words(rng)
    state, obs = jax.jit(env.reset)(seed_words(rng), params)
    out = [(np.array(obs),)]
    step = jax.jit(env.step)
    for t, action in enumerate(actions):
        if params_at is not None and t == params_at[0]:
            params = params_at[1]
        key, step_key = jax.random.split(key)
        state, ts = step(step_key, state, jnp.asarray(action), params)
        out.append((np.array(ts.obs), float(ts.reward), bool(ts.terminated), bool(ts.truncated)))
    return out


def _front_episode(env, seed, actions, params_at=None):
    out = [(env.reset(seed=seed)[0],)]
    for t, action in enumerate(actions):
        if params_at is not None and t == params_at[0]:
            env.unwrapped.params = params_at[1]
        obs, reward, terminated, truncated, info = env.step(action)
        assert isinstance(reward, float) and type(terminated) is bool and type(truncated) is bool
        assert info == {} and obs.flags.writeable
        out.append((obs, reward, terminated, truncated))
    return out


def _assert_same(ours, theirs):
    assert len(ours) == len(theirs)
    for t, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        np.testing.assert_array_equal(a[0], b[0], err_msg=f"obs at step {t}")
        assert a[0].dtype == b[0].dtype and a[0].shape == b[0].shape
        assert a[1:] == b[1:], f"reward/flags at step {t}: {a[1:]} != {b[1:]}"


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1", "Acrobot-v1"])
def test_transitions_equal_the_unpacked_step_over_an_episode(env_id):
    # Limit 40 through jaxsim (JaxsimEnv, no TimeLimit), so truncation comes from the buffer.
    env = jaxsim.gymnasium.JaxsimEnv(env_id, max_episode_steps=40)
    env.action_space.seed(1)
    actions = [env.action_space.sample() for _ in range(45)]
    ours = _front_episode(env, 3, actions)
    done = next(t for t, o in enumerate(ours[1:]) if o[2] or o[3]) + 2
    theirs = _reference_episode(env_id, 3, actions, max_episode_steps=40)
    _assert_same(ours[:done], theirs[:done])
    assert ours[done - 1][2] or (ours[done - 1][3] and done == 41)


def test_a_stochastic_env_draws_the_same_keys_as_before():
    pytest.importorskip("gymnax", reason="gymnax not installed")
    env_id = "gymnax/Breakout-MinAtar"  # sticky actions: its step reads the split key
    env = jaxsim.gymnasium.JaxsimEnv(env_id)
    assert env.jax_env.draws.step_key
    actions = [int(a) for a in np.random.default_rng(0).integers(0, env.action_space.n, 30)]
    _assert_same(_front_episode(env, 5, actions), _reference_episode(env_id, 5, actions))


def test_params_set_mid_episode_act_from_the_next_step():
    env = gym.make("jaxsim/CartPole-v1").unwrapped
    heavy = env.params.replace(masscart=jnp.float32(5.0), force_mag=jnp.float32(3.0))
    actions = [1, 0, 1, 1, 0, 1]
    ours = _front_episode(env, 0, actions, params_at=(3, heavy))
    theirs = _reference_episode("CartPole-v1", 0, actions, params_at=(3, heavy))
    _assert_same(ours, theirs)
    assert env.params is heavy
    with pytest.raises(TypeError, match="params must be CartPoleParams"):
        env.params = {"masscart": 5.0}


@pytest.mark.parametrize(
    "action, message",
    [
        (2, r"be integers in \[0, 2\), got array\(2\)"),
        (-1, r"be integers in \[0, 2\), got array\(-1\)"),
        (np.int64(7), r"be integers in \[0, 2\)"),
        (1.0, r"be integers in \[0, 2\), got array\(1\.\)"),
        (np.float64(1.0), r"be integers in \[0, 2\)"),
        (True, r"be integers in \[0, 2\), got array\(True\)"),
        (np.array([1]), r"have shape \(\), got \(1,\)"),
        ("1", r"be integers in \[0, 2\)"),
    ],
)
def test_bad_discrete_actions_raise_naming_the_env_and_what_was_given(action, message):
    env = gym.make("jaxsim/CartPole-v1")
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"jaxsim/CartPole-v1: actions must " + message):
        env.unwrapped.step(action)


def test_every_integer_spelling_of_an_action_steps_alike_without_recompiling():
    env = gym.make("jaxsim/CartPole-v1").unwrapped
    programs = gymnasium_step.programs(env.jax_env)
    results = []
    for action in (1, np.int64(1), np.int32(1), np.uint8(1), np.array(1), np.array(1, np.int16)):
        env.reset(seed=0)
        results.append(env.step(action)[:4])
    assert all(np.array_equal(r[0], results[0][0]) and r[1:] == results[0][1:] for r in results)
    assert programs.step._cache_size() == 1  # one program for every spelling


def test_box_actions_are_checked_and_converted():
    env = gym.make("jaxsim/Pendulum-v1").unwrapped
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"jaxsim/Pendulum-v1: actions must have shape \(1,\)"):
        env.step(np.zeros(2, np.float32))
    first = env.step([0.5])  # a list of floats: converted to float32[1]
    env.reset(seed=0)
    again = env.step(np.array([0.5], np.float64))
    np.testing.assert_array_equal(first[0], again[0])
    assert first[1:4] == again[1:4]


def test_step_before_reset_is_reset_needed_for_every_action_kind():
    env = jaxsim.gymnasium.JaxsimEnv("CartPole-v1")
    for action in (0, np.array(0), 5):
        with pytest.raises(gym.error.ResetNeeded):
            env.step(action)
    assert env.render() is None and env._state is None


def test_one_compiled_call_and_no_device_get_per_step(monkeypatch):
    env = gym.make("jaxsim/CartPole-v1").unwrapped
    env.reset(seed=0)
    programs = env._programs
    calls = []
    step = programs.step
    monkeypatch.setattr(programs, "step", lambda *a: calls.append(1) or step(*a))

    def no_device_get(*_):
        raise AssertionError("a step read its outputs back one by one")

    monkeypatch.setattr(jax, "device_get", no_device_get)
    for _ in range(3):
        env.step(0)
    assert len(calls) == 3


def test_state_is_readable_and_the_env_pickles_mid_episode():
    env = gym.make("jaxsim/CartPole-v1").unwrapped
    env.reset(seed=2)
    env.step(1)
    state = env._state
    assert isinstance(state, env.jax_env.state_type) and int(state.time) == 1
    copy = pickle.loads(pickle.dumps(env))
    a, b = env.step(0), copy.step(0)
    np.testing.assert_array_equal(a[0], b[0])
    assert a[1:4] == b[1:4]


def test_the_buffer_layout_round_trips_every_narrow_dtype():
    values = {
        "b": np.array([True, False, True]),
        "i8": np.array([-128, 5, 127], np.int8),
        "u16": np.array([0, 65535, 7], np.uint16),
        "f16": np.array([-1.5, np.inf, 3e-5], np.float16),
        "bf16": np.array([2.5, -0.0, 1e30], jnp.bfloat16),
        "i32": np.array([[-(2**31), 2**31 - 1]], np.int32),
        "f32": np.array([np.nan, -0.0, 1e-45], np.float32),
    }
    layout = gymnasium_step.Layout("test", jax.eval_shape(lambda v: v, values))
    host = layout.pack_host("test", values)
    device = jax.jit(layout.pack)(values)
    np.testing.assert_array_equal(np.asarray(device), host)
    back = jax.jit(layout.unpack)(device)
    names = jax.tree.structure(values).flatten_up_to(values)
    for i, (name, value) in enumerate(zip(sorted(values), names, strict=True)):
        for got in (back[name], layout.host_leaf(host, i)):
            assert got.dtype == value.dtype
            np.testing.assert_array_equal(np.asarray(got).view(np.uint8), value.view(np.uint8))
    with pytest.raises(TypeError, match=r"at most 32 bits, got float64\[2\]"):
        gymnasium_step.Layout("test", [jax.ShapeDtypeStruct((2,), np.float64)])


def test_a_large_discrete_space_passes_checked_numpy_actions(monkeypatch):
    # Above _MAX_TABLE actions no device table is kept: the checked action is the argument.
    env = gym.make("jaxsim/CartPole-v1").unwrapped
    monkeypatch.setattr(gymnasium_step, "_MAX_TABLE", 1)
    untabled = gymnasium_step.Programs(env.jax_env)
    assert untabled.table == {}
    env.reset(seed=0)
    expected = [env.step(a)[:4] for a in (1, 0, 1)]
    env._programs = untabled
    env.reset(seed=0)
    got = [env.step(a)[:4] for a in (1, np.int64(0), 1)]
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1:] == b[1:]
    with pytest.raises(ValueError, match=r"integers in \[0, 2\)"):
        env.step(2)
