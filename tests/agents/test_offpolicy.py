"""DQN and SAC (agents/): the replay buffer, targets and log-probabilities against hand and
numerical references, learning on trivial tasks, resume, bad input, the command."""

from __future__ import annotations

import dataclasses
import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy.stats import norm
from test_ppo import BANDIT, ContextBandit, _assert_trees_equal

import jaxsim
from agents import checkpoint, losses, replay, train
from agents.dqn import DQN, DQNConfig
from agents.sac import SAC, SACConfig
from jaxsim.policies import mlp_apply


class ContinuousBandit(ContextBandit):
    """One step: observe a context c of -1 or +1, act a in [-1, 1], get 1 - (a - c / 2)^2."""

    id = "ContinuousBandit-v0"

    def dynamics(self, s, action, p):
        reward = 1.0 - (action[..., 0] - 0.5 * s.context) ** 2
        return s, reward, jnp.ones_like(reward, bool)

    def action_space(self, p):
        return jaxsim.Box(-1.0, 1.0, (1,))


SIZES = dict(num_envs=8, num_steps=4, buffer_size=256, learning_starts=64, batch_size=32)
DQN_BANDIT = DQNConfig(
    **SIZES,
    total_steps=32 * 25,
    gradient_steps=8,
    target_update_every=8,
    learning_rate=1e-2,
    exploration_fraction=0.5,
    hidden=(16,),
    eval_envs=16,
    log_every=5,
)
SAC_BANDIT = SACConfig(
    **SIZES, total_steps=32 * 40, gradient_steps=8, learning_rate=1e-2, hidden=(16,), eval_envs=16
)


# ------------------------------------------------------------------------------ replay buffer
def _numbered(start: int, n: int) -> replay.Transition:
    """n transitions whose every field holds its number (start, start + 1, ...)."""
    x = jnp.arange(start, start + n, dtype=jnp.float32)
    return replay.Transition(x[:, None], x.astype(jnp.int32), x, x[:, None] + 0.5, x > 0, x < 0)


def test_buffer_wraps_around_overwriting_the_oldest():
    buf = replay.init(5, jax.tree.map(lambda x: x[0], _numbered(0, 1)))
    buf = replay.add(buf, _numbered(1, 3))
    assert (int(buf.pos), int(buf.size)) == (3, 3)
    buf = replay.add(buf, _numbered(4, 3))  # 4, 5 fill slots 3, 4; 6 overwrites slot 0
    assert (int(buf.pos), int(buf.size)) == (1, 5)
    np.testing.assert_array_equal(buf.data.reward, [6, 2, 3, 4, 5])
    np.testing.assert_array_equal(buf.data.action, [6, 2, 3, 4, 5])
    np.testing.assert_array_equal(buf.data.next_obs[:, 0], [6.5, 2.5, 3.5, 4.5, 5.5])
    with pytest.raises(ValueError, match="exceeds the capacity 5"):
        replay.add(buf, _numbered(0, 6))


def test_sampling_draws_only_filled_slots_uniformly():
    buf = replay.init(100, jax.tree.map(lambda x: x[0], _numbered(0, 1)))
    buf = replay.add(buf, _numbered(1, 4))
    batch = replay.sample(buf, jax.random.key(0), 4000)
    counts = np.bincount(np.asarray(batch.reward, int), minlength=5)
    assert counts[0] == 0 and counts.sum() == 4000  # slot values 1..4 only, never an empty slot
    np.testing.assert_allclose(counts[1:] / 4000, 0.25, atol=0.03)
    # Rows stay whole: every field of a sampled transition comes from the same slot.
    np.testing.assert_array_equal(batch.obs[:, 0], batch.reward)
    np.testing.assert_array_equal(batch.next_obs[:, 0], batch.reward + 0.5)


def test_a_minibatch_may_outnumber_the_transitions_held_as_in_sb3():
    # Sampling is with replacement (above), so SB3's SAC numbers are a valid config: learning
    # from 104 transitions (13 updates of 8) with minibatches of 256.
    config = SACConfig(learning_starts=100, batch_size=256, num_steps=8)
    assert config.first_learning_update * config.steps_per_update == 104 < config.batch_size


def test_buffer_keeps_the_true_next_obs_across_auto_resets():
    env = jaxsim.make("CartPole-v1", max_episode_steps=6)  # time-outs every 6 steps
    traj = jaxsim.rollout(env, "random", 20, num_envs=3, key=jax.random.key(1))
    done = np.asarray(traj.done)
    assert done[:-1].any() and np.asarray(traj.truncated).any()
    buf = replay.add(replay.init(64, replay.example_transition(env)), replay.from_trajectory(traj))
    stored = jax.tree.map(lambda x: np.asarray(x[:60]).reshape(20, 3, *x.shape[1:]), buf.data)
    np.testing.assert_array_equal(stored.next_obs, traj.next_obs)
    np.testing.assert_array_equal(stored.obs, traj.obs)
    obs, next_obs = np.asarray(traj.obs), stored.next_obs
    # Inside an episode next_obs[t] is obs[t + 1]; where it ended, obs[t + 1] is a reset state.
    within = ~done[:-1]
    np.testing.assert_array_equal(next_obs[:-1][within], obs[1:][within])
    assert not np.isclose(next_obs[:-1][done[:-1]], obs[1:][done[:-1]]).all(axis=-1).any()


# ---------------------------------------------------------------------------------- the math
def test_double_q_target_hand_computed():
    reward = jnp.array([1.0, 2.0, 3.0])
    terminated = jnp.array([False, True, False])  # the third is truncated: it bootstraps
    online = jnp.array([[0.0, 5.0], [7.0, 0.0], [9.0, 1.0]])  # picks actions 1, 0, 0
    target = jnp.array([[10.0, 20.0], [30.0, 40.0], [50.0, 60.0]])
    y = losses.double_q_target(reward, terminated, online, target, 0.9)
    # 1 + 0.9 * 20 (target at the online argmax, not max 20 by luck: see row 3); 2; 3 + 0.9 * 50
    np.testing.assert_allclose(y, [19.0, 2.0, 48.0], rtol=1e-6)


@pytest.mark.parametrize("huber_delta, expected", [(1.0, 2.5), (100.0, 4.5)])
def test_dqn_loss_is_squared_up_to_huber_delta_then_linear(huber_delta, expected):
    agent = DQN(dataclasses.replace(DQN_BANDIT, huber_delta=huber_delta), BANDIT)
    params = agent.init_params(jax.random.key(0))
    obs = jnp.array([[-1.0], [1.0]])
    action = jnp.array([0, 1], jnp.int32)
    q = jnp.take_along_axis(mlp_apply(params["q"], obs, jax.nn.relu), action[:, None], 1)[:, 0]
    # Terminated: the target is the reward alone, 3 above Q (errors of 3 and -3 alike).
    reward = q + jnp.array([3.0, -3.0])
    done = jnp.array([True, True])
    batch = replay.Transition(obs, action, reward, obs, done, ~done)
    loss, _ = agent.loss(params, params["q"], batch, jax.random.key(1))
    # Huber: 0.5 * 3^2 = 4.5 where 3 <= delta, else delta * (3 - delta / 2) = 2.5 at delta 1.
    np.testing.assert_allclose(loss, expected, rtol=1e-5)


def test_sac_target_hand_computed():
    reward = jnp.array([1.0, 1.0, 1.0])
    terminated = jnp.array([False, True, False])  # the third is truncated: it bootstraps
    q1, q2 = jnp.array([4.0, 4.0, 2.0]), jnp.array([3.0, 9.0, 6.0])
    log_prob = jnp.array([-1.0, -1.0, 0.5])
    y = losses.sac_target(reward, terminated, q1, q2, log_prob, 0.2, 0.5)
    # 1 + 0.5 * (3 + 0.2); 1; 1 + 0.5 * (2 - 0.1)
    np.testing.assert_allclose(y, [2.6, 1.0, 1.95], rtol=1e-6)


def test_squashed_log_prob_matches_numerical_density():
    mean, log_std = np.array([0.3, -1.2]), np.array([-0.4, 0.5])
    u = np.array([[-2.0, 0.1], [0.7, 1.5], [0.0, -0.8]])
    got = losses.squashed_gaussian_log_prob(*map(jnp.asarray, (mean, log_std, u)))
    # The density of a = tanh(u), per dimension: the derivative of its CDF by central differences.
    a, h, std = np.tanh(u), 1e-6, np.exp(log_std)

    def cdf(x):
        return norm.cdf((np.arctanh(x) - mean) / std)

    expected = np.log((cdf(a + h) - cdf(a - h)) / (2 * h)).sum(-1)
    np.testing.assert_allclose(got, expected, rtol=1e-4)
    # Where tanh(u) rounds to -1 in float32 the correction stays finite (log(1 - tanh^2) is not).
    far = losses.squashed_gaussian_log_prob(jnp.zeros(1), jnp.zeros(1), jnp.array([[-12.0]]))
    assert np.isfinite(far).all() and np.tanh(np.float32(-12.0)) == -1.0


# ---------------------------------------------------------------------------------- learning
@pytest.mark.parametrize(
    "agent_cls, config, env", [(DQN, DQN_BANDIT, BANDIT), (SAC, SAC_BANDIT, ContinuousBandit())]
)
def test_learns_trivial_task(agent_cls, config, env):
    agent = agent_cls(config, env)
    keys = jax.random.split(jax.random.key(0), 2)
    runner = jax.jit(jax.vmap(agent.init))(keys)
    final, metrics = agent.jit_run(config.num_updates)(runner)
    returns = np.asarray(jax.jit(jax.vmap(agent.evaluate))(final, keys))
    # Random play earns 0.5 (DQN) or ~0.42 (SAC); the deterministic policy must be near 1.
    assert returns.mean() >= 0.95, returns
    assert int(final.buffer.size[0]) == config.buffer_size  # 800 / 1280 steps through 256 slots
    assert np.isfinite(np.asarray(jax.tree.leaves(metrics.loss))).all()


def test_annealed_learning_rate_ends_at_zero_on_the_last_gradient_step():
    config = dataclasses.replace(DQN_BANDIT, anneal_lr=True)
    agent = DQN(config, BANDIT)
    final, _ = jax.jit(lambda key: agent.run(agent.init(key), config.num_updates))(
        jax.random.key(0)
    )
    # 25 updates of 32 steps; the buffer holds learning_starts=64 after the 2nd: 24 x 8 steps.
    assert config.total_gradient_steps == 24 * 8 == int(final.grad_steps)
    counts = optax.tree_utils.tree_get_all_with_path(final.opt_state, "count")
    # Adam's and the schedule's: the schedule has run to its end, learning rate 0.
    assert [int(c) for _, c in counts] == [config.total_gradient_steps] * 2
    # A zero gradient still moves Adam (its momentum); at learning rate 0 nothing moves.
    zeros = jax.tree.map(jnp.zeros_like, final.params)
    updates, _ = agent.optimizer.update(zeros, final.opt_state, final.params)
    assert all(float(jnp.abs(u).max()) == 0.0 for u in jax.tree.leaves(updates))
    returns = np.asarray(agent.evaluate(final, jax.random.key(1)))
    assert returns.mean() >= 0.95, returns


# ------------------------------------------------------------------------------------ resume
@pytest.mark.parametrize("agent_cls, config", [(DQN, DQN_BANDIT), (SAC, SAC_BANDIT)])
def test_resume_from_a_checkpoint_equals_uninterrupted(tmp_path, agent_cls, config):
    env = jaxsim.make("CartPole-v1" if agent_cls is DQN else "Pendulum-v1")
    config = dataclasses.replace(config, total_steps=32 * 6, learning_starts=32)
    agent = agent_cls(config, env)
    runner = jax.jit(jax.vmap(agent.init))(jax.random.split(jax.random.key(3), 2))
    half = agent.jit_run(3)
    first, _ = half(runner)
    path = str(tmp_path / "checkpoint.msgpack")
    checkpoint.save_checkpoint(path, first, config, env, num_seeds=2)
    restored = checkpoint.load_checkpoint(path)
    assert restored.meta["algorithm"] == agent_cls.name and restored.config == config
    _assert_trees_equal(restored.runner, first)  # the replay buffer included
    resumed, _ = half(restored.runner)
    # One scan of 6 updates for DQN; SAC's compile is slower, so its straight run is 3 + 3
    # without the checkpoint (the scan's chunking is checked on DQN and PPO).
    straight = agent.jit_run(6)(runner)[0] if agent_cls is DQN else half(first)[0]
    _assert_trees_equal(resumed, straight)


# --------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "algorithm, flags, message",
    [
        ("dqn", ["--buffer-size", "20", "--learning-starts", "10"], "buffer_size=20 is smaller"),
        ("dqn", ["--learning-starts", "600000"], "learning_starts=600000 must be in"),
        # The buffer given, so the check does not rest on the preset's.
        (
            "dqn",
            ["--learning-starts", "20000", "--buffer-size", "10000"],
            "learning_starts=20000 exceeds buffer_size",
        ),
        ("dqn", ["--env", "Pendulum-v1"], "DQN: Pendulum-v1 has action space Box"),
        ("sac", ["--env", "CartPole-v1"], "SAC: CartPole-v1 has action space Discrete"),
        ("sac", ["--tau", "0"], "tau must be a float > 0 and <= 1, got 0.0"),
        ("dqn", ["--end-e", "2"], "end_e must be a float >= 0 and <= 1, got 2.0"),
        ("dqn", ["--rollout-backend", "warp"], "unknown backend"),
    ],
)
def test_command_rejects_bad_input_before_compiling(capsys, tmp_path, algorithm, flags, message):
    env = (
        []
        if "--env" in flags
        else ["--env", "Pendulum-v1" if algorithm == "sac" else "CartPole-v1"]
    )
    with pytest.raises(SystemExit) as exit_info:
        train.main([algorithm, "--out", str(tmp_path), *env, *flags])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_each_algorithm_has_its_own_flags():
    dqn_help = " ".join(train.build_parser("dqn").format_help().split())
    assert "--exploration-fraction" in dqn_help and "--gae-lambda" not in dqn_help
    assert (
        "Replay buffer capacity in transitions, per seed. (DQNConfig default: 100000)" in dqn_help
    )
    args = train.build_parser("sac").parse_args(["sac", "--hidden", "32,16", "--no-learn-alpha"])
    assert train.config_overrides(args, SACConfig) == {"hidden": (32, 16), "learn_alpha": False}


def test_phases_are_named_scopes():
    agent = DQN(dataclasses.replace(DQN_BANDIT, total_steps=32 * 3, learning_starts=32), BANDIT)
    runner = agent.init(jax.random.key(0))
    text = jax.jit(agent.update).lower(runner).as_text(debug_info=True)
    names = {part for loc in re.findall(r'loc\("([^"]*)"', text) for part in loc.split("/")}
    for phase in ("rollout", "policy", "env_step", "replay", "loss", "backward", "optimizer"):
        assert phase in names, phase
    assert "target_update" in names


# ----------------------------------------------------------------------------------- command
def test_command_end_to_end_with_resume(tmp_path, capsys, monkeypatch):
    flags = ["dqn", "--env", "CartPole-v1", "--seeds", "2", "--total-steps", "256", "--num-envs",
             "2", "--num-steps", "16", "--learning-starts", "32", "--batch-size", "16",
             "--gradient-steps", "4", "--hidden", "8", "--eval-envs", "2", "--log-every", "2",
             "--checkpoint-every", "4", "--no-plot",
             "--target-return", "none"]  # fmt: skip
    # --target-return none: the whole budget, no stop checks (the preset stops at 475).
    out = tmp_path / "run"
    summary = train.main([*flags, "--out", str(out)])
    printed = capsys.readouterr().out
    assert "[dqn CartPole-v1] update 8/8" in printed and "evaluation" in printed
    evaluation = json.loads((out / "eval.json").read_text())
    assert evaluation["steps_per_seed"] == 256
    assert evaluation["mean_return"] == pytest.approx(np.mean(evaluation["per_seed_mean_return"]))
    header = (out / "metrics.csv").read_text().splitlines()[0]
    assert header.endswith("episodes,q_loss,q_value,epsilon")

    saves = []

    def save_then_stop(*args, **kwargs):
        checkpoint.save_checkpoint(*args, **kwargs)
        saves.append(args[0])
        if len(saves) == 1:
            raise KeyboardInterrupt  # preempted right after the first checkpoint

    stopped = [*flags, "--out", str(tmp_path / "stopped")]
    monkeypatch.setattr(train, "save_checkpoint", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        train.main(stopped)
    with pytest.raises(SystemExit):  # the checkpoint is a DQN run: resuming it as SAC is refused
        train.main(["sac", *stopped[1:3], "--out", str(tmp_path / "stopped"), "--resume"])
    assert "is a dqn run, not sac" in capsys.readouterr().err
    resumed = train.main([*stopped, "--resume"])
    _assert_trees_equal(
        checkpoint.load_checkpoint(resumed["checkpoint"]).runner,
        checkpoint.load_checkpoint(summary["checkpoint"]).runner,
    )
    assert resumed["eval"]["per_seed_mean_return"] == summary["eval"]["per_seed_mean_return"]
