"""Stable-Baselines3 interop: jaxsim's batched step as an SB3 VecEnv (skipped without SB3)."""

import pickle

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

from gymnasium.vector import AutoresetMode  # noqa: E402

import jaxsim.gymnasium as jgym  # noqa: E402 (after the importorskip)


def _sb3():
    return pytest.importorskip("stable_baselines3", reason="stable-baselines3 (and torch) absent")


def test_an_autoreset_mode_other_than_same_step_is_refused_by_name():
    # Checked before SB3 is imported: this runs without it too.
    for mode in (AutoresetMode.NEXT_STEP, "NextStep", "nonsense"):
        with pytest.raises(ValueError, match=r"autoreset_mode must be AutoresetMode.SAME_STEP"):
            jgym.make_sb3_vec_env("CartPole-v1", 2, autoreset_mode=mode)


def test_same_step_may_be_given():
    _sb3()
    for mode in (AutoresetMode.SAME_STEP, "SameStep"):
        venv = jgym.make_sb3_vec_env("CartPole-v1", 2, autoreset_mode=mode)
        assert venv.venv.autoreset_mode == AutoresetMode.SAME_STEP


def test_sb3_vec_env_semantics():
    sb3 = pytest.importorskip("stable_baselines3", reason="stable-baselines3 (and torch) absent")
    venv = jgym.make_sb3_vec_env("jaxsim/CartPole-v1", 3, max_episode_steps=4)
    assert isinstance(venv, sb3.common.vec_env.VecEnv) and venv.num_envs == 3
    venv.seed(0)
    obs = venv.reset()
    assert obs.shape == (3, 4) and obs.dtype == np.float32
    venv.seed(0)
    np.testing.assert_array_equal(venv.reset(), obs)
    for t in range(1, 5):
        obs, reward, done, infos = venv.step(np.zeros(3, np.int64))
        assert reward.dtype == np.float32 and len(infos) == 3
        assert done.all() == (t == 4)
    for info in infos:  # truncated at the limit: SB3 bootstraps from the terminal observation
        assert info["TimeLimit.truncated"] is True
        assert info["terminal_observation"].shape == (4,)
        assert not np.array_equal(info["terminal_observation"], obs[0])
    assert np.all(np.abs(obs) <= 0.05)  # reset in the same step
    assert venv.get_attr("render_mode") == [None] * 3
    assert venv.env_is_wrapped(gym.Wrapper) == [False] * 3


def test_sb3_ppo_learns_briefly_through_both_routes():
    pytest.importorskip("stable_baselines3", reason="stable-baselines3 (and torch) absent")
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor

    # As the README's example: VecMonitor gives SB3 the episode returns it logs.
    vec_env = VecMonitor(jgym.make_sb3_vec_env("CartPole-v1", num_envs=4))
    model = PPO("MlpPolicy", vec_env, n_steps=32, batch_size=64, seed=0)
    model.learn(total_timesteps=256)
    assert len(model.ep_info_buffer) > 0 and all(ep["r"] > 0 for ep in model.ep_info_buffer)
    # Through gymnasium.make: SB3 wraps the single env in its own DummyVecEnv.
    env = gym.make("jaxsim/Pendulum-v1")
    PPO("MlpPolicy", env, n_steps=64, batch_size=64, seed=0).learn(total_timesteps=256)


def test_env_method_acts_once_on_the_whole_batch_or_refuses():
    _sb3()
    venv = jgym.make_sb3_vec_env("Pendulum-v1", 3)
    venv.seed(0)
    venv.reset()
    action = np.zeros((3, 1), np.float32)
    for subset in ([0, 1], 2, [0, 0, 1]):
        with pytest.raises(ValueError, match=r"env_method\('step'\) acts on the whole batch"):
            venv.env_method("step", action, indices=subset)
        with pytest.raises(ValueError, match=r"set_attr acts on the whole batch"):
            venv.set_attr("params_sampler", None, indices=subset)
    # Every index: one step of the batch (three steps would put the clock at 3), its answer
    # repeated for each index.
    results = venv.env_method("step", action, indices=[2, 0, 1])
    assert len(results) == 3 and all(r is results[0] for r in results)
    assert np.asarray(venv.venv._moving.counter) == 1
    assert venv.get_attr("num_envs", indices=[1]) == [3]  # reading is per index


def test_set_options_is_refused_not_ignored():
    _sb3()
    venv = jgym.make_sb3_vec_env("CartPole-v1", 2)
    venv.set_options(None)  # nothing to pass: fine
    venv.set_options({})
    with pytest.raises(ValueError, match=r"set_options: jaxsim's resets take no options"):
        venv.set_options({"low": -0.1})
    with pytest.raises(ValueError, match=r"set_options: jaxsim's resets take no options"):
        venv.set_options([{}, {"low": -0.1}])


def test_vec_monitor_logs_episode_returns_and_the_env_pickles():
    sb3 = _sb3()
    from stable_baselines3.common.vec_env import VecMonitor

    venv = VecMonitor(jgym.make_sb3_vec_env("CartPole-v1", 2, max_episode_steps=5))
    venv.seed(0)
    venv.reset()
    episodes = []
    for _ in range(5):
        *_, infos = venv.step(np.zeros(2, np.int64))
        episodes += [info["episode"] for info in infos if "episode" in info]
    assert len(episodes) == 2 and all(ep["l"] <= 5 and ep["r"] == ep["l"] for ep in episodes)
    copy = pickle.loads(pickle.dumps(venv.venv))
    assert isinstance(copy, sb3.common.vec_env.VecEnv)
    np.testing.assert_array_equal(
        copy.step(np.ones(2, np.int64))[0], venv.step(np.ones(2, np.int64))[0]
    )
