"""Adapter environments (gymnax, brax) through the Gymnasium front: ids, registration, steps."""

import subprocess
import sys

import jax
import numpy as np
import pytest

import jaxsim

gym = pytest.importorskip("gymnasium")

from gymnasium.vector import AutoresetMode  # noqa: E402

import jaxsim.gymnasium as jgym  # noqa: E402 (after the importorskip)
from jaxsim.rollout.step import Lanes  # noqa: E402

BREAKOUT = "gymnax/Breakout-MinAtar"


def test_adapter_ids_have_gymnasium_valid_spellings_both_ways():
    pairs = {
        "CartPole-v1": "jaxsim/CartPole-v1",
        BREAKOUT: "jaxsim/gymnax-Breakout-MinAtar",
        "gymnax/Pendulum-v1": "jaxsim/gymnax-Pendulum-v1",
        "brax/inverted_pendulum": "jaxsim/brax-inverted_pendulum",
    }
    for native, gym_name in pairs.items():
        assert jgym.gym_id(native) == gym_name
        assert jgym.jaxsim_id(gym_name) == native
        assert jgym.jaxsim_id(native) == native
        assert jgym.register(native) == gym_name == jgym.register(gym_name)
        spec = gym.spec(gym_name)
        assert spec.kwargs == {"env_id": native}
        # An adapter's limit is known once its library loads: jaxsim's truncates, no TimeLimit.
        assert spec.max_episode_steps == (500 if native == "CartPole-v1" else None)
    for bad in ("Nope-v0", "gymnax/", "gymnax/a/b", "mujoco/Ant-v5"):
        with pytest.raises(ValueError, match="unknown environment id"):
            jgym.register(bad)


def test_an_adapter_id_whose_make_fails_does_not_stay_registered():
    pytest.importorskip("gymnax", reason="gymnax not installed: pip install 'jaxsim-rl[gymnax]'")
    for make in (jgym.make, lambda i: jgym.make_vec(i, 2)):
        with pytest.raises(ValueError, match="unknown gymnax id 'Bogus-v0'"):
            make("gymnax/Bogus-v0")
        assert "jaxsim/gymnax-Bogus-v0" not in gym.registry
    jgym.register("gymnax/Bogus-v0")  # registered by hand: a failed make leaves it alone
    with pytest.raises(ValueError, match="unknown gymnax id"):
        jgym.make("gymnax/Bogus-v0")
    assert "jaxsim/gymnax-Bogus-v0" in gym.registry
    del gym.registry["jaxsim/gymnax-Bogus-v0"]


@pytest.mark.parametrize("limit", [3, 205])  # below and above gymnax Pendulum's 200
def test_an_adapters_max_episode_steps_reaches_jaxsim(limit):
    pytest.importorskip("gymnax", reason="gymnax not installed: pip install 'jaxsim-rl[gymnax]'")
    env = jgym.make("gymnax/Pendulum-v1", max_episode_steps=limit)
    assert env.unwrapped.params.max_episode_steps == limit
    env.reset(seed=0)
    steps = 1
    while not env.step(np.zeros(1, np.float32))[3]:  # Pendulum never terminates
        steps += 1
        assert steps <= limit
    assert steps == limit


def test_registering_adapters_imports_neither_library():
    code = (
        "import sys, gymnasium, jaxsim.gymnasium as g\n"
        "ids = [g.register(i) for i in ('gymnax/Breakout-MinAtar', 'brax/ant', "
        "'playground/CartpoleBalance')]\n"
        "assert all(gymnasium.spec(i).vector_entry_point for i in ids), ids\n"
        "print(sorted(m for m in ('gymnax', 'brax', 'mujoco_playground') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_gymnax_env_through_the_vector_front_equals_jaxsims_rollout():
    pytest.importorskip("gymnax", reason="gymnax not installed: pip install 'jaxsim-rl[gymnax]'")
    num_envs, n = 8, 30
    venv = jgym.make_vec(BREAKOUT, num_envs, autoreset_mode=AutoresetMode.SAME_STEP)
    env = jaxsim.make(BREAKOUT)
    params = env.default_params
    assert isinstance(venv, jgym.JaxsimVectorEnv)
    # Spaces are jaxsim's: MinAtar's [10, 10, 4] boolean channels as floats, gymnax's actions.
    obs_space, act_space = env.observation_space(params), env.action_space(params)
    assert venv.single_observation_space.shape == obs_space.shape == (10, 10, 4)
    np.testing.assert_array_equal(venv.single_observation_space.low, obs_space.low)
    np.testing.assert_array_equal(venv.single_observation_space.high, obs_space.high)
    assert venv.single_action_space == gym.spaces.Discrete(act_space.n)

    obs0, _ = venv.reset(seed=1)
    # jaxsim.rollout from the front's state after reset, playing the same actions. Resets draw
    # from different seeds (the front's from np_random, the rollout's from its key), so each
    # lane is compared up to and including the step that ends its first episode.
    axes = env.params_axes(params, num_envs)
    start = venv._moving.carry.to_state(env, Lanes(vmapped=True), params, axes)
    start = jax.tree.map(jax.numpy.copy, start)  # the front's step donates its state
    np.testing.assert_array_equal(np.asarray(start.obs), obs0)
    venv.action_space.seed(2)
    actions = np.stack([venv.action_space.sample() for _ in range(n)])
    steps = [venv.step(a) for a in actions]
    policy = jaxsim.OpenLoopPolicy(jax.numpy.asarray(actions, jax.numpy.int32))
    out = jaxsim.rollout(env, policy, n, num_envs=num_envs, state=start, key=jax.random.key(0))
    done = np.asarray(out.done)
    first_end = np.where(done.any(axis=0), done.argmax(axis=0), n - 1)
    assert (done.any(axis=0)).any()  # some episode ends inside the run
    for t, (obs, reward, terminated, truncated, info) in enumerate(steps):
        live = t <= first_end  # lanes still in their first episode (or ending it now)
        np.testing.assert_array_equal(reward[live], np.asarray(out.reward[t])[live])
        np.testing.assert_array_equal(terminated[live], np.asarray(out.terminated[t])[live])
        np.testing.assert_array_equal(truncated[live], np.asarray(out.truncated[t])[live])
        true_next = np.asarray(out.next_obs[t])
        for i in np.flatnonzero(live):
            shown = info["final_obs"][i] if terminated[i] or truncated[i] else obs[i]
            np.testing.assert_array_equal(shown, true_next[i])
