"""benchmarks.baselines.envpool_vec: Stable-Baselines3 on EnvPool (skipped without EnvPool, SB3)."""

import numpy as np
import pytest

pytest.importorskip("envpool", reason="EnvPool is not installed")
sb3 = pytest.importorskip("stable_baselines3", reason="stable-baselines3 (and torch) absent")

from benchmarks.baselines.envpool_vec import envpool_vec_env  # noqa: E402 (after the importorskips)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # Gymnasium's Box precision notes


def test_finished_environments_reset_in_the_same_step():
    venv = envpool_vec_env("CartPole-v1", 4, seed=0)
    try:
        assert isinstance(venv, sb3.common.vec_env.VecEnv) and venv.num_envs == 4
        obs = venv.reset()
        assert obs.shape == (4, 4) and obs.dtype == np.float32
        ends = 0
        for _ in range(40):  # always right: every episode falls over within ~10 steps
            obs, reward, done, infos = venv.step(np.ones(4, np.int64))
            assert (reward == 1).all()  # no reward-free reset step, as EnvPool's own autoreset
            for i in np.flatnonzero(done):
                ends += 1
                assert abs(infos[i]["terminal_observation"][2]) > 0.2  # the pole that fell
                assert (np.abs(obs[i]) <= 0.05).all()  # a fresh episode, in the same step
                assert infos[i]["TimeLimit.truncated"] is False
            for i in np.flatnonzero(~done):
                assert "terminal_observation" not in infos[i]
        assert ends >= 4
    finally:
        venv.close()


def test_same_seed_same_environments():
    a, b = envpool_vec_env("CartPole-v1", 3, seed=7), envpool_vec_env("CartPole-v1", 3, seed=7)
    c = envpool_vec_env("CartPole-v1", 3, seed=8)
    try:
        assert np.array_equal(a.reset(), b.reset())
        assert not np.array_equal(a.reset(), c.reset())
    finally:
        for v in (a, b, c):
            v.close()


def test_sb3_ppo_learns_and_evaluates_on_it():
    from stable_baselines3 import PPO
    from stable_baselines3.common.evaluation import evaluate_policy

    venv = envpool_vec_env("CartPole-v1", 2, seed=0)
    model = PPO("MlpPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=256)
    assert model.num_timesteps == 256
    # CartPole pays 1 a step: each episode's return is its length, counted by SB3 from `done`.
    returns, lengths = evaluate_policy(
        model, venv, n_eval_episodes=4, deterministic=True, return_episode_rewards=True, warn=False
    )
    assert len(returns) == 4 and returns == [float(n) for n in lengths]
    assert all(8 <= n <= 500 for n in lengths)
    venv.close()
