"""PPO (agents/): losses against hand and loop references, learning, resume, vmap, the command."""

from __future__ import annotations

import dataclasses
import json
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

import jaxsim
from agents import callbacks, checkpoint, logs, normalizers, train
from agents.networks import make_actor_critic, to_policy
from agents.ppo import PPO, PPOConfig, make_train
from jaxsim.policies import init_mlp, mlp_apply


# ----------------------------------------------------------------------------- a trivial task
@struct.dataclass
class BanditParams:
    max_episode_steps: int = 10


@struct.dataclass
class BanditState:
    context: jax.Array
    time: jax.Array


class ContextBandit(jaxsim.Env):
    """One step: observe a context of -1 or +1, get reward 1 for action (context > 0), else 0."""

    id = "ContextBandit-v0"
    params_type = BanditParams
    state_type = BanditState
    draws = jaxsim.Draws(reset=1)

    def init_state(self, u, params):
        context = jnp.where(u[0] < 0.5, -1.0, 1.0).astype(jnp.float32)
        return BanditState(context, jnp.zeros(jnp.shape(u[0]), jnp.int32))

    def dynamics(self, s, action, p):
        right = (action == 1) == (s.context > 0)
        return s, jnp.where(right, 1.0, 0.0), jnp.ones_like(right)

    def obs_fields(self, s, p):
        return (s.context,)

    def observation_space(self, p):
        return jaxsim.Box(-1.0, 1.0, (1,))

    def action_space(self, p):
        return jaxsim.Discrete(2)


BANDIT = ContextBandit()
BANDIT_CONFIG = PPOConfig(
    total_steps=8 * 8 * 24,
    num_envs=8,
    num_steps=8,
    update_epochs=4,
    num_minibatches=2,
    learning_rate=1e-2,
    eval_envs=16,
    log_every=5,
    hidden=(16,),
)
# Pendulum exercises the Gaussian head, observation normalisation and reward scaling.
PENDULUM_CONFIG = PPOConfig(
    total_steps=2 * 16 * 4,
    num_envs=2,
    num_steps=16,
    update_epochs=2,
    num_minibatches=2,
    normalize_obs=True,
    scale_rewards=True,
    hidden=(8,),
)


def _assert_trees_equal(a, b, exact=True):
    def unkey(x):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x = jax.random.key_data(x)
        return np.asarray(x)

    a, b = jax.tree.map(unkey, a), jax.tree.map(unkey, b)
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        if exact:
            np.testing.assert_array_equal(x, y)
        else:
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------ network
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_network_forward_equals_mlp_policy(env_id):
    env = jaxsim.make(env_id)
    init = make_actor_critic(env, hidden=(8, 8), init_log_std=-0.5)
    params = init(jax.random.key(0))
    # The init is jaxsim's: same key, same weights, bit for bit.
    reference = jaxsim.init_mlp_policy(jax.random.key(0), env, hidden=(8, 8), log_std=-0.5)
    expected = {"actor": reference.actor, "critic": reference.critic}
    if not reference.discrete:
        expected["log_std"] = reference.log_std
    _assert_trees_equal(params, expected)
    obs = jax.random.normal(jax.random.key(1), (6, env.observation_space(env.default_params).size))
    # Give the zero-initialised biases values so the test sees them.
    params = jax.tree.map(lambda x: x + 0.1 * jnp.arange(x.size).reshape(x.shape), params)
    out = mlp_apply(params["actor"], obs)
    value = mlp_apply(params["critic"], obs)[:, 0]
    action, extras = to_policy(params, deterministic=True)(jax.random.key(2), obs)
    np.testing.assert_allclose(extras["value"], value, rtol=1e-5, atol=1e-5)
    log_prob, _, value2 = to_policy(params).evaluate(obs, action)
    np.testing.assert_allclose(value2, value, rtol=1e-5, atol=1e-5)
    if "log_std" not in params:
        np.testing.assert_array_equal(action, jnp.argmax(out, -1))
        expected = jnp.take_along_axis(jax.nn.log_softmax(out), action[:, None], -1)[:, 0]
    else:
        np.testing.assert_allclose(action, out, rtol=1e-6)
        expected = jax.scipy.stats.norm.logpdf(action, out, jnp.exp(params["log_std"])).sum(-1)
    np.testing.assert_allclose(log_prob, expected, rtol=1e-5, atol=1e-5)
    # Observation normalisation folded into the first layers equals normalising the input.
    stats = normalizers.RunningStats(
        mean=jnp.linspace(-1, 1, obs.shape[1]), var=jnp.linspace(0.5, 2, obs.shape[1]), count=10.0
    )
    _, folded = to_policy(params, stats, deterministic=True)(jax.random.key(2), obs)
    value_n = mlp_apply(params["critic"], normalizers.normalize(stats, obs))[:, 0]
    np.testing.assert_allclose(folded["value"], value_n, rtol=1e-4, atol=1e-4)


def test_mlp_pieces_build_off_policy_networks():
    obs, action = jnp.ones((5, 3)), jnp.ones((5, 2))
    q_net = init_mlp(jax.random.key(0), (3, 16, 4), (1.0, 1.0))
    assert mlp_apply(q_net, obs, jax.nn.relu).shape == (5, 4)  # one value per discrete action
    twin = jax.vmap(lambda k: init_mlp(k, (5, 16, 1), (1.0, 1.0)))(
        jax.random.split(jax.random.key(1), 2)
    )
    q1, q2 = jax.vmap(mlp_apply, (0, None))(twin, jnp.concatenate([obs, action], -1))[..., 0]
    assert q1.shape == (5,) and not np.allclose(q1, q2)  # two critics, independently initialised
    with pytest.raises(ValueError, match="2 layers need as many gains"):
        init_mlp(jax.random.key(0), (3, 16, 4), (1.0,))


def test_orthogonal_init_matches_flax_without_lapack():
    import flax.linen as nn

    orthogonal = jaxsim.orthogonal_init

    for shape in [(4, 64), (64, 64), (64, 2), (1, 16)]:
        ours = orthogonal(1.3)(jax.random.key(5), shape)
        theirs = nn.initializers.orthogonal(1.3)(jax.random.key(5), shape)
        np.testing.assert_allclose(ours, theirs, atol=2e-5)
    # A vmapped init must not reach LAPACK (concurrent OpenBLAS QRs can hang on CPU).
    agent = PPO(BANDIT_CONFIG, BANDIT)
    text = jax.jit(jax.vmap(agent.init)).lower(jax.random.split(jax.random.key(0), 2)).as_text()
    assert "lapack" not in text.lower()


# ---------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "field, value, message",
    [
        ("num_envs", 0, "num_envs must be an integer >= 1, got 0"),
        ("num_steps", -3, "num_steps must be an integer >= 1, got -3"),
        ("num_minibatches", 3, "does not divide the batch"),
        ("learning_rate", 0.0, "learning_rate must be a float > 0, got 0.0"),
        ("learning_rate", -1e-3, "learning_rate must be a float > 0"),
        ("total_steps", 10, "less than one batch"),
        ("gamma", 1.5, "gamma must be a float > 0 and <= 1, got 1.5"),
        ("hidden", (), "hidden must be"),
    ],
)
def test_invalid_config_is_rejected(field, value, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(PPOConfig(), **{field: value})


def test_unservable_action_space_is_rejected():
    class MatrixActions(ContextBandit):
        def action_space(self, p):
            return jaxsim.Box(-1.0, 1.0, (2, 2))

    with pytest.raises(ValueError, match="action space"):
        PPO(PPOConfig(), MatrixActions())


def test_the_backend_is_checked_up_front_without_tracing_a_step(monkeypatch):
    class Refused(ContextBandit):
        def step(self, key, state, action, params):  # the kernel would not see an override
            return super().step(key, state, action, params)

    steps = []
    dynamics = ContextBandit.dynamics
    monkeypatch.setattr(
        ContextBandit, "dynamics", lambda self, *args: steps.append(1) or dynamics(self, *args)
    )
    PPO(PPOConfig(), ContextBandit())
    assert steps == []  # making an agent traces no step (brax's takes ~1 s to trace)
    with pytest.raises(ValueError, match="unknown backend 'warp'"):
        PPO(PPOConfig(rollout_backend="warp"), ContextBandit())
    with pytest.raises(ValueError, match="fused backend cannot run.*overrides Env.step"):
        PPO(PPOConfig(rollout_backend="fused"), Refused())
    assert steps == []  # refused before any tracing
    PPO(PPOConfig(rollout_backend="fused"), ContextBandit())  # the kernel runs this one
    assert steps == [1, 1]  # the kernel's check traces dynamics on a block and vmapped (shapes)


def test_every_config_field_is_a_flag_with_its_help_and_default():
    text = " ".join(train.build_parser().format_help().split())  # argparse wraps lines
    for field in dataclasses.fields(PPOConfig):
        flag = "--" + field.name.replace("_", "-")
        help_text = " ".join(field.metadata["help"].split())
        assert f"{help_text} (PPOConfig default: {field.default!r})" in text, flag
        assert flag in text
    assert "--no-anneal-lr" in text
    args = train.build_parser().parse_args(["ppo", "--hidden", "32,16", "--no-anneal-lr"])
    assert train.config_overrides(args, PPOConfig) == {"hidden": (32, 16), "anneal_lr": False}


def test_command_rejects_bad_input_before_compiling(capsys, tmp_path):
    cases = [
        (["--env", "NoSuchEnv-v0"], "unknown environment id"),
        (["--num-minibatches", "3"], "does not divide"),
        (["--learning-rate", "0"], "learning_rate must be a float > 0"),
        (["--num-envs", "0"], "num_envs must be an integer >= 1, got 0"),
        (["--seeds", "0"], "--seeds must be an integer >= 1, got 0"),
        (["--rollout-backend", "warp"], "unknown backend"),
    ]
    for flags, message in cases:
        with pytest.raises(SystemExit) as exit_info:
            train.main(["ppo", "--out", str(tmp_path), *flags])
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


# ----------------------------------------------------------------------------------- training
@pytest.fixture(scope="module")
def bandit_run():
    calls = []
    agent = PPO(BANDIT_CONFIG, BANDIT, progress=calls.append)
    keys = jax.random.split(jax.random.key(0), 2)
    runner = jax.jit(jax.vmap(agent.init))(keys)
    final, metrics = agent.jit_run(BANDIT_CONFIG.num_updates)(runner)
    returns = jax.jit(jax.vmap(agent.evaluate))(final, keys)
    return agent, keys, final, metrics, returns, calls


def test_learns_trivial_task(bandit_run):
    *_, metrics, returns, _ = bandit_run
    # Random play earns 0.5 per episode; the deterministic policy must be (nearly) always right.
    assert float(returns.mean()) >= 0.95, returns
    assert float(metrics.mean_return[:, -1].mean()) >= 0.85, metrics.mean_return[:, -1]
    assert np.all(np.asarray(metrics.steps[:, -1]) == BANDIT_CONFIG.total_steps)


def test_progress_callback_is_throttled(bandit_run):
    *_, calls = bandit_run
    n, every = BANDIT_CONFIG.num_updates, BANDIT_CONFIG.log_every
    reported = sorted({int(m.update) for m in calls})
    assert reported == [u for u in range(1, n + 1) if u % every == 0 or u == n]
    assert len(calls) == 2 * len(reported)  # once per seed under vmap
    progress = logs.TrainingProgress(num_seeds=2, num_updates=n, stream=None)
    for m in calls:
        progress(m)
    assert [r["update"] for r in progress.rows] == reported
    assert progress.rows[-1]["mean_return"] is not None


def test_report_is_one_host_call_for_all_seeds():
    got = []

    def step(x, i):
        tree = {"update": i + 1, "value": x * 2.0}
        callbacks.report_when(i % 2 == 1, got.append, tree)
        return x, None

    def run(x):
        return jax.lax.scan(step, x, jnp.arange(4))[0]

    x = jnp.arange(3, dtype=jnp.float32)
    # One host callback in the program for all 3 elements (plain debug.callback makes 3).
    text = jax.jit(jax.vmap(run)).lower(x).as_text()
    assert len(re.findall(r"custom_call @\w*callback", text)) == 1
    jax.block_until_ready(jax.jit(jax.vmap(run))(x))
    jax.effects_barrier()
    assert sorted((int(t["update"]), float(t["value"])) for t in got) == [
        (u, 2.0 * v) for u in (2, 4) for v in (0, 1, 2)
    ]


def test_vmap_over_seeds_equals_single_seed_runs(bandit_run):
    _, keys, final, metrics, *_ = bandit_run
    config = dataclasses.replace(BANDIT_CONFIG, total_steps=BANDIT_CONFIG.total_steps)
    single = jax.jit(make_train(config, BANDIT))
    for i in range(2):
        runner_i, metrics_i = single(keys[i])
        one = jax.tree.map(lambda x, i=i: x[i], (final, metrics))
        # vmap batches the matmuls, which may round differently; the runs agree to float noise.
        _assert_trees_equal(one, (runner_i, metrics_i), exact=False)


def test_resume_equals_uninterrupted(tmp_path):
    env = jaxsim.make("Pendulum-v1")
    agent = PPO(PENDULUM_CONFIG, env)
    n = PENDULUM_CONFIG.num_updates
    runner = jax.jit(jax.vmap(agent.init))(jax.random.split(jax.random.key(3), 2))
    straight, _ = agent.jit_run(n)(runner)

    half = agent.jit_run(n // 2)
    first, _ = half(runner)
    path = str(tmp_path / "ckpt" / "checkpoint.msgpack")
    checkpoint.save_checkpoint(path, first, PENDULUM_CONFIG, env, num_seeds=2)
    assert not [f for f in os.listdir(tmp_path / "ckpt") if ".tmp" in f]
    restored = checkpoint.load_checkpoint(path)
    assert restored.config == PENDULUM_CONFIG and restored.meta["update"] == n // 2
    _assert_trees_equal(restored.runner, first)
    resumed, _ = half(restored.runner)
    _assert_trees_equal(resumed, straight)
    assert half._cache_size() == 1  # the second chunk reused the compiled function


def test_phases_are_named_scopes():
    train_fn = make_train(dataclasses.replace(BANDIT_CONFIG, total_steps=64), BANDIT)
    text = jax.jit(train_fn).lower(jax.random.key(0)).as_text(debug_info=True)
    names = {part for loc in re.findall(r'loc\("([^"]*)"', text) for part in loc.split("/")}
    for phase in (
        "rollout",
        "policy",
        "env_step",
        "gae",
        "shuffle",
        "loss",
        "backward",
        "optimizer",
    ):
        assert phase in names, phase


# ------------------------------------------------------------------------------------ command
def test_command_end_to_end(tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    # test_play.py's sizes (2 updates, a chunk and a checkpoint every update): the programs its
    # run compiled, loaded from the suite's compilation cache.
    flags = [
        "ppo",
        "--env",
        "CartPole-v1",
        "--seeds",
        "2",
        "--total-steps",
        "128",
        "--num-envs",
        "2",
        "--num-steps",
        "32",
        "--num-minibatches",
        "2",
        "--update-epochs",
        "1",
        "--hidden",
        "8",
        "--eval-envs",
        "3",
        "--log-every",
        "1",
        "--checkpoint-every",
        "1",
        "--out",
        str(out),
    ]
    summary = train.main(flags)
    printed = capsys.readouterr().out
    assert "update 1/2" in printed and "SPS" in printed and "evaluation" in printed
    for name in ("checkpoint.msgpack", "config.json", "metrics.csv", "metrics.jsonl", "eval.json"):
        assert (out / name).exists(), name
    assert (out / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "episode.gif").read_bytes()[:6] == b"GIF89a"  # one evaluation episode
    rows = logs.read_metrics(str(out))
    assert [r["update"] for r in rows] == [1, 2]
    assert json.loads((out / "eval.json").read_text())["steps_per_seed"] == 128
    assert summary["eval"]["mean_return"] > 0

    # A saved policy runs with jaxsim.rollout in a few lines.
    env, policy = checkpoint.load_policy(summary["checkpoint"], seed=1)
    traj = jaxsim.rollout(env, policy, 20, num_envs=3)
    assert traj.action.shape == (20, 3)

    # A run stopped after its first checkpoint and resumed with --resume ends where the
    # uninterrupted one did, bit for bit.
    saves = []

    def save_then_stop(*args, **kwargs):
        checkpoint.save_checkpoint(*args, **kwargs)
        saves.append(args[0])
        if len(saves) == 1:
            raise KeyboardInterrupt  # preempted right after the first checkpoint

    stopped = [*flags[:-1], str(tmp_path / "stopped")]
    monkeypatch.setattr(train, "save_checkpoint", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        train.main(stopped)
    assert checkpoint.load_checkpoint(saves[0]).meta["update"] == 1
    resumed = train.main([*stopped, "--resume"])
    assert len(saves) == 2
    _assert_trees_equal(
        checkpoint.load_checkpoint(resumed["checkpoint"]).runner,
        checkpoint.load_checkpoint(summary["checkpoint"]).runner,
    )
    assert resumed["eval"]["per_seed_mean_return"] == summary["eval"]["per_seed_mean_return"]
    rows = logs.read_metrics(resumed["out"])
    assert [r["update"] for r in rows] == [1, 2]
