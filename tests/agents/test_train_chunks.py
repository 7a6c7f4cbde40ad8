"""The train command's host loop: progress between chunks, the stop at a target, the XLA cache."""

from __future__ import annotations

import dataclasses
import json
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

import jaxsim
from agents import compile_cache, logs, train
from agents.loop import MIN_EPISODES, confirmed, independent_evaluation, run_chunks
from agents.ppo import PPO, PPOConfig


@struct.dataclass
class _Params:
    max_episode_steps: int = 4


@struct.dataclass
class _State:
    sign: jax.Array
    time: jax.Array


class SignBandit(jaxsim.Env):
    """One step: observe -1 or +1, reward 1 for the action that matches its sign. Learnt in a few
    updates, so a stop at return 0.9 comes long before the budget ends."""

    id = "SignBandit-v0"
    params_type = _Params
    state_type = _State
    draws = jaxsim.Draws(reset=1)

    def init_state(self, u, params):
        sign = jnp.where(u[0] < 0.5, -1.0, 1.0).astype(jnp.float32)
        return _State(sign, jnp.zeros(jnp.shape(u[0]), jnp.int32))

    def dynamics(self, state, action, params):
        right = (action == 1) == (state.sign > 0)
        return state, jnp.where(right, 1.0, 0.0), jnp.ones_like(right)

    def obs_fields(self, state, params):
        return (state.sign,)

    def observation_space(self, params):
        return jaxsim.Box(-1.0, 1.0, (1,))

    def action_space(self, params):
        return jaxsim.Discrete(2)


CONFIG = PPOConfig(
    total_steps=8 * 8 * 200,
    num_envs=8,
    num_steps=8,
    update_epochs=4,
    num_minibatches=1,
    learning_rate=1e-2,
    eval_envs=16,
    log_every=3,
    hidden=(16,),
)


SLOW_SOLVE = dataclasses.replace(CONFIG, learning_rate=1e-4, total_steps=8 * 8 * 60)


@pytest.fixture(scope="module")
def stopped():
    agent = PPO(CONFIG, SignBandit())
    runner = jax.jit(jax.vmap(agent.init))(jax.random.split(jax.random.key(0), 3))
    reports = []
    final, solved = run_chunks(
        agent, runner, CONFIG.num_updates, chunk=3, target=0.9, on_chunk=reports.append
    )
    return agent, runner, final, solved, reports


def test_the_run_stops_once_every_seed_reaches_the_target(stopped):
    _, _, final, solved, reports = stopped
    assert all(u is not None for u in solved), solved
    last = reports[-1]
    assert last.done == max(solved) < CONFIG.num_updates  # stopped long before the budget
    assert [r.done for r in reports] == list(range(3, last.done + 1, 3))
    assert np.all(last.eval_returns >= 0.9)
    for r in reports:  # a seed counts as solved from the first check that saw it at the target
        newly = [s for s, u in enumerate(r.solved_update) if u == r.done]
        assert all(r.eval_returns[s] >= 0.9 for s in newly)
    np.testing.assert_array_equal(np.asarray(final.update), solved)


def test_a_solved_seed_was_confirmed_by_the_final_evaluation(stopped):
    agent, _, final, solved, reports = stopped
    final_returns = independent_evaluation(agent, final, 0, 3)
    assert final_returns.shape == (3, 32)  # 2 batches of eval_envs=16: MIN_EPISODES
    # Each seed's confirming evaluation is the final one, repeated on its frozen runner.
    np.testing.assert_array_equal(final_returns.mean(axis=1) >= 0.9, True)
    confirms = {s: r.confirm_returns[s] for r in reports for s in range(3) if solved[s] == r.done}
    np.testing.assert_allclose([confirms[s] for s in range(3)], final_returns.mean(axis=1))


@struct.dataclass
class _CoinState:
    heads: jax.Array
    time: jax.Array


class HiddenCoin(SignBandit):
    """One step, nothing to observe: reward 1 if the action names a coin flipped at reset. Any
    deterministic policy wins half its episodes; two episodes both won (a quarter of the
    checks) look solved."""

    id = "HiddenCoin-v0"
    state_type = _CoinState

    def init_state(self, u, params):
        return _CoinState(u[0] < 0.5, jnp.zeros(jnp.shape(u[0]), jnp.int32))

    def dynamics(self, state, action, params):
        right = (action == 1) == state.heads
        return state, jnp.where(right, 1.0, 0.0), jnp.ones_like(right)

    def obs_fields(self, state, params):
        return (jnp.zeros_like(state.heads, jnp.float32),)


def test_a_lucky_stop_check_is_not_solved_without_the_independent_evaluation():
    config = dataclasses.replace(CONFIG, eval_envs=2, total_steps=8 * 8 * 12)
    agent = PPO(config, HiddenCoin())
    runner = jax.jit(jax.vmap(agent.init))(jax.random.split(jax.random.key(0), 3))
    reports = []
    _, solved = run_chunks(
        agent, runner, config.num_updates, chunk=1, target=0.9, on_chunk=reports.append
    )
    lucky = [(r, s) for r in reports for s in range(3) if r.eval_returns[s] >= 0.9]
    assert lucky, "no stop check passed by luck: pick another seed"
    for r, s in lucky:  # the confirming evaluation ran, and found the seed unsolved
        assert r.confirm_returns[s] < 0.9
    assert solved == [None, None, None]
    assert all(r.solved_update == [None] * 3 for r in reports)


def test_the_rule_needs_enough_independent_episodes():
    assert confirmed(1.0, np.ones(MIN_EPISODES), 0.9)
    assert not confirmed(1.0, np.r_[np.ones(16), np.zeros(16)], 0.9)
    assert not confirmed(0.8, np.ones(MIN_EPISODES), 0.9)
    with pytest.raises(ValueError, match=r"independent_returns must hold >= 32 episodes, got 8"):
        confirmed(1.0, np.ones(8), 0.9)


def test_a_solved_seed_is_frozen_where_it_reached_the_target(stopped):
    agent, runner, final, solved, _ = stopped
    s = int(np.argmin(solved))  # solved first: the loop ran on and discarded its later updates
    u = solved[s]
    one = jax.tree.map(lambda x: x[s], runner)
    straight, _ = jax.jit(agent.run, static_argnums=1)(one, u)  # u updates, never stopped
    kept = jax.tree.map(lambda x: x[s], final)
    assert int(kept.update) == u
    # vmapped and single-seed programs round apart by an ulp; later updates move far more.
    for a, b in zip(jax.tree.leaves(straight.params), jax.tree.leaves(kept.params), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_seeds_one_at_a_time_skip_frozen_seeds_and_match_the_vmapped_run():
    # Slow enough to solve apart; SLOW_SOLVE's vmapped programs (init, run(1), evaluate) are
    # those of test_checkpoint_boundaries_change_nothing_in_the_result below, compiled once.
    config = SLOW_SOLVE
    runner = jax.jit(jax.vmap(PPO(config, SignBandit()).init))(
        jax.random.split(jax.random.key(0), 3)
    )
    runs = {}
    for apart in (False, True):
        agent, calls, reports = PPO(config, SignBandit()), [], []
        run = agent.jit_run

        def counting(n, run=run, calls=calls):
            def call(r):
                calls.append(int(np.shape(r.update)[0]))  # seeds in this call
                return run(n)(r)

            return call

        agent.jit_run = counting
        final, solved = run_chunks(
            agent, runner, config.num_updates, chunk=1, target=0.9, on_chunk=reports.append,
            one_seed_at_a_time=apart,
        )  # fmt: skip
        runs[apart] = final, solved, calls, reports
    (final, solved, calls, reports), (got, got_solved, got_calls, seen) = runs[False], runs[True]
    assert got_solved == solved and len(set(solved)) > 1, solved  # seeds solved apart
    assert set(calls) == {3} and len(calls) == max(solved)  # vmapped: every seed, every chunk
    # One at a time: one single-seed program, each seed run only until it was solved.
    assert set(got_calls) == {1} and len(got_calls) == sum(solved) < 3 * max(solved)
    np.testing.assert_array_equal(np.asarray(got.update), solved)
    for a, b in zip(jax.tree.leaves(got.params), jax.tree.leaves(final.params), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)  # vmapped vs single: an ulp
    for mine, theirs in zip(seen, reports, strict=True):  # frozen seeds show their last rows
        assert mine.solved_update == theirs.solved_update
        np.testing.assert_allclose(mine.metrics.mean_return, theirs.metrics.mean_return, 1e-5)
        np.testing.assert_allclose(mine.eval_returns, theirs.eval_returns, 1e-5)


def test_progress_rows_come_from_chunk_metrics_without_a_host_callback(stopped):
    agent, runner, _, _, reports = stopped
    text = agent.jit_run(3).lower(runner).as_text()
    assert not re.search(r"callback", text)  # nothing keeps it out of the compilation cache
    progress = logs.TrainingProgress(3, CONFIG.num_updates, stream=None)
    for r in reports:
        solved = sum(u is not None for u in r.solved_update)
        progress.report_chunk(r.done, r.done * CONFIG.batch_size, r.metrics, r.eval_returns, solved)
    rows = progress.rows
    assert [row["update"] for row in rows] == [r.done for r in reports]
    assert [row["step"] for row in rows] == [r.done * CONFIG.batch_size for r in reports]
    assert rows[-1]["solved_seeds"] == 3 and rows[-1]["eval_return"] >= 0.9
    assert rows[-1]["mean_return"] is not None and "eval_return" not in logs.loss_fields(rows[-1])


@pytest.fixture
def restore_cache_config():
    saved = compile_cache.current_dir()  # the suite's own cache (tests/conftest.py), or None
    yield
    compile_cache.enable(saved) if saved else compile_cache.disable()


CARTPOLE_TINY = ["--num-envs", "4", "--num-steps", "8", "--total-steps", "64", "--log-every", "1"]


def test_train_caches_compiles_in_the_given_folder_and_says_where(
    tmp_path, capsys, restore_cache_config
):
    cache = tmp_path / "xla"
    argv = ["ppo", "--out", str(tmp_path / "run"), "--no-plot", *CARTPOLE_TINY]
    summary = train.main([*argv, "--compilation-cache", str(cache), "--target-return", "600"])
    out = capsys.readouterr().out
    assert out.count("XLA compilation cache") == 1 and str(cache) in out
    assert compile_cache.current_dir() == str(cache)
    assert any(cache.iterdir())  # the training loop (no callback in it) was written there
    # 600 is out of reach: every chunk was checked, and the run went to its budget.
    evaluation = json.loads((tmp_path / "run" / "eval.json").read_text())
    assert evaluation["target_return"] == 600 and evaluation["steps_per_seed"] == 64
    assert evaluation["steps_to_target_per_seed"] == [None]
    assert evaluation["solved_per_seed"] == [False] and evaluation["episodes_per_seed"] >= 32
    assert summary["eval"]["target_return"] == 600


def test_no_compilation_cache_turns_it_off(tmp_path, capsys, restore_cache_config):
    compile_cache.enable(tmp_path / "xla")
    # The cache is set before anything else is checked: a bad size ends the run uncompiled.
    argv = ["ppo", "--out", str(tmp_path), "--no-compilation-cache", "--num-envs", "0"]
    with pytest.raises(SystemExit):
        train.main([*argv, "--target-return", "none"])
    assert "XLA compilation cache: off" in capsys.readouterr().out
    assert compile_cache.current_dir() is None


def test_bad_cache_folder_and_target_are_refused_before_compiling(tmp_path, capsys):
    a_file = tmp_path / "file"
    a_file.write_text("")
    for flags, message in (
        (["--compilation-cache", str(a_file)], "exists and is not a folder"),
        (["--target-return", "high"], "expected a return (a number) or 'none'"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            train.main(["ppo", "--out", str(tmp_path / "run"), *flags])
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


def test_the_default_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(compile_cache.ENV_VAR, "off")
    assert compile_cache.default_dir() is None
    monkeypatch.setenv(compile_cache.ENV_VAR, str(tmp_path))
    assert compile_cache.default_dir() == str(tmp_path)
    monkeypatch.delenv(compile_cache.ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert compile_cache.default_dir() == str(tmp_path / "jaxsim" / "xla")


def test_an_unusable_default_cache_folder_falls_back_to_no_cache_with_one_warning(
    tmp_path, capsys, monkeypatch, restore_cache_config
):
    home = tmp_path / "home"
    home.write_text("")  # a home nothing can be created in (root ignores read-only modes)
    monkeypatch.delenv(compile_cache.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    argv = ["ppo", "--out", str(tmp_path / "run"), "--no-plot", *CARTPOLE_TINY]
    train.main([*argv, "--target-return", "none"])
    captured = capsys.readouterr()
    assert "XLA compilation cache: off" in captured.out
    assert captured.err.count("warning:") == 1 and "compiling without a cache" in captured.err
    assert "--compilation-cache:" not in captured.err  # a flag the user never passed
    assert compile_cache.current_dir() is None
    with pytest.raises(SystemExit):  # a folder the user names must work
        train.main([*argv, "--compilation-cache", str(home / "xla")])
    assert "--compilation-cache: compilation cache: cannot create" in capsys.readouterr().err


def test_a_cache_entry_cut_short_by_a_kill_is_replaced(tmp_path, restore_cache_config):
    cache = tmp_path / "xla"
    compile_cache.enable(cache)
    f = jax.jit(lambda x: jnp.sin(x) * 3.0 + 1.0)
    x = np.arange(5.0, dtype=np.float32)  # numpy: the jitted program is the only one compiled
    expected = f(x)
    entries = {p: p.stat().st_size for p in cache.glob("*-cache")}
    assert entries
    for path in entries:  # a kill during JAX's in-place write leaves the head of the file
        path.write_bytes(path.read_bytes()[:40])
    jax.clear_caches()  # as a new process: the program must come from the disk cache
    compile_cache.enable(cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # JAX warns on every read of a torn entry
        np.testing.assert_array_equal(f(x), expected)
    for path in entries:  # written again whole (a recompile may differ by a few bytes)
        assert path.stat().st_size > 40


def test_precompile_builds_what_the_run_calls_once(monkeypatch):
    from agents.agent import compiler_options

    agent = PPO(CONFIG, SignBandit())
    keys = jax.random.split(jax.random.key(1), 2)
    for program in ("init", "run", "evaluate"):
        compiler_options(program)  # its probes of unknown options compile before counting
    compiles = []

    def count(event, secs, **kwargs):
        if event.endswith("backend_compile_duration"):
            compiles.append(kwargs.get("fun_name"))

    jax.monitoring.register_event_duration_secs_listener(count)
    try:
        agent.precompile(2, (3, 3), evaluate=True)
        assert sorted(compiles) == ["jit(evaluate)", "jit(init)", "jit(run)"]  # run(3) once
        runner = agent.jit_init()(keys)
        runner, _ = agent.jit_run(3)(runner)
        agent.jit_evaluate()(runner, keys)
        assert len(compiles) == 3  # the calls reuse what precompile built
    finally:
        unregister = getattr(jax.monitoring, "unregister_event_duration_listener", None)
        if unregister is not None:
            unregister(count)


def test_compile_options_per_program_leave_out_what_jaxlib_does_not_know(monkeypatch):
    from agents import agent as agent_module

    if jax.default_backend() != "cpu":
        pytest.skip("the options are XLA:CPU's")
    assert agent_module.compiler_options("init")["xla_backend_optimization_level"] == 0
    assert agent_module.compiler_options("run") == agent_module.CPU_COMPILER_OPTIONS
    bogus = {**agent_module.CPU_PROGRAM_OPTIONS, "evaluate": {"xla_no_such_option": True}}
    monkeypatch.setattr(agent_module, "CPU_PROGRAM_OPTIONS", bogus)
    assert agent_module.compiler_options("evaluate") == agent_module.CPU_COMPILER_OPTIONS


def test_programs_of_an_env_that_asks_compile_without_ynnpack_fusions():
    # jaxlib 0.10's XLA:CPU hands batched dots and reductions to YNNPACK (a "__ynn_fusion"); in a
    # physics pipeline's inner loops (brax's) that costs ~13x per step, so the physics adapters
    # ask for none (`Env.cpu_compiler_options`); other envs' programs keep them.
    from agents.agent import compiler_options
    from jaxsim.envs.adapters import StateStepEnv

    if jax.default_backend() != "cpu":
        pytest.skip("the options are XLA:CPU's")
    x, w = np.ones((2048, 8), np.float32), np.ones((8, 8), np.float32)

    def f(x, w):
        return (x @ w).sum(1)

    def fusions(options) -> bool:
        return "ynn_fusion" in jax.jit(f).lower(x, w).compile(compiler_options=options).as_text()

    if not fusions(None):
        pytest.skip("this jaxlib makes no YNNPACK fusions")
    assert fusions(compiler_options("run", SignBandit()))
    for program in ("init", "run", "evaluate"):
        assert not fusions(compiler_options(program, StateStepEnv)), program


def test_checkpoint_boundaries_change_nothing_in_the_result():
    boundary = 2  # before the fix, a check at update 2 solved two seeds there, not at 3
    agent = PPO(SLOW_SOLVE, SignBandit())
    runner = jax.jit(jax.vmap(agent.init))(jax.random.split(jax.random.key(0), 3))
    runs = []
    for cut in (None, boundary):
        reports = []
        final, solved = run_chunks(
            agent, runner, SLOW_SOLVE.num_updates, chunk=3, target=0.9, boundary=cut,
            on_chunk=reports.append,
        )  # fmt: skip
        checks = [(r.done, r.eval_returns.tolist()) for r in reports if r.eval_returns is not None]
        runs.append((final, solved, checks))
    (final, solved, checks), (cut_final, cut_solved, cut_checks) = runs
    assert cut_solved == solved and cut_checks == checks  # the same stop checks, same outcome
    assert all(done % 3 == 0 for done, _ in checks)
    for a, b in zip(jax.tree.leaves(final), jax.tree.leaves(cut_final), strict=True):
        np.testing.assert_array_equal(jax.random.key_data(a) if _is_key(a) else a,
                                      jax.random.key_data(b) if _is_key(b) else b)  # fmt: skip


def _is_key(x) -> bool:
    return jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def test_the_command_gives_the_same_run_whatever_checkpoint_every(tmp_path):
    c = SLOW_SOLVE
    argv = [
        "ppo", "--env", f"{__name__}:SignBandit", "--seeds", "3", "--num-envs", str(c.num_envs),
        "--num-steps", str(c.num_steps), "--total-steps", str(c.total_steps),
        "--update-epochs", str(c.update_epochs), "--num-minibatches", "1",
        "--learning-rate", str(c.learning_rate), "--eval-envs", str(c.eval_envs),
        "--log-every", "3", "--hidden", "16", "--target-return", "0.9", "--no-plot", "--quiet",
    ]  # fmt: skip
    results = []
    for every in ("0", "2"):
        out = tmp_path / every
        summary = train.main([*argv, "--checkpoint-every", every, "--out", str(out)])
        evaluation = {k: v for k, v in summary["eval"].items() if k != "wall_time"}
        timed = ("wall_time", "sps")
        rows = [{k: v for k, v in r.items() if k not in timed} for r in logs.read_metrics(out)]
        results.append((evaluation, rows))
    assert results[0] == results[1]
    assert [r["update"] for r in results[0][1]] == [3]  # solved at the first check
