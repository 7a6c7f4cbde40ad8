"""The peers suite: a peer whose venv is absent is skipped with the command that makes it (as in
CI), its record passes the report's checks, and its peer scripts stay out of jaxsim's imports."""

import ast
import json
import sys
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from benchmarks.harness import registry  # noqa: E402
from benchmarks.harness.suite import Plan  # noqa: E402
from benchmarks.peers import brax_case, measure, sbx_case  # noqa: E402
from benchmarks.peers import suite as report  # noqa: E402


def test_absent_peer_venvs_are_skipped_with_their_setup_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PEER_ENVS", str(tmp_path / "no-envs"))
    out = tmp_path / "peers.json"
    cases = "brax_ppo_speed,rejax_ppo,sbx_ppo"
    assert measure.main(["--cases", cases, "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    for case, peer in (("brax_ppo_speed", "brax"), ("rejax_ppo", "rejax"), ("sbx_ppo", "sbx")):
        why = record["cases"][case]["skipped"]
        assert f"bash benchmarks/peers/setup_envs.sh {peer}" in why
        # Where it looked, as the record keeps paths: by $PEER_ENVS, naming no machine path.
        assert f"$PEER_ENVS/{peer}/bin/python not found" in why and str(tmp_path) not in why
    assert registry.record_problems(record) == []
    assert "setup_envs.sh rejax" in capsys.readouterr().out  # the printed table says why


def test_bad_cases_and_seeds_are_refused_before_any_work(tmp_path):
    with pytest.raises(SystemExit, match="unknown case"):
        measure.main(["--cases", "brax_ppo_speed,nope", "--out", str(tmp_path / "x.json")])
    with pytest.raises(SystemExit, match="--seeds must be >= 1, got 0"):
        measure.main(["--seeds", "0", "--out", str(tmp_path / "x.json")])
    assert not list(tmp_path.iterdir())


def test_the_suite_is_registered_and_its_smoke_mode_is_one_tiny_case():
    suite = registry.SUITES["peers"]
    smoke = suite.args(Plan("smoke", frozenset(), False))
    assert "--smoke" in smoke and smoke[smoke.index("--cases") + 1] == "rejax_ppo"
    assert registry.suite_available(suite) is None


def test_equal_config_takes_brax_published_loop_shape():
    config = brax_case.equal_config("inverted_pendulum")
    # brax: batch 1024 x 32 minibatches x unroll 5 = 163,840 env steps per training step.
    assert config.steps_per_update == brax_case.steps_per_update("inverted_pendulum") == 163_840
    assert config.minibatch_size == 1024 * 5 and config.update_epochs == 4
    assert (config.gamma, config.ent_coef, config.anneal_lr) == (0.97, 1e-2, False)


def test_report_gives_each_case_its_ratio_verdict_and_load():
    case = {
        "jaxsim": {"sps": 20_000.0, "compile_s": 150.0, "load": [9.0, 10.0]},
        "brax": {"steady_sps": 40_000.0, "compile_s": 120.0, "versions": {"jax": "0.9.2"}},
        "comparison": {"ratio": 0.5, "target": ">= 1x", "target_met": False},
        "load_after": 11.0,
    }
    record = {"benchmark": "peers", "provenance": {}, "cases": {"brax_ppo_speed": case}}
    assert registry.record_problems(record) == []
    (row,) = report.rows(record)
    assert row[3].startswith("0.5x") and "not met" in row[4] and "jax 0.9.2" in row[2]
    assert row[5] == "9.0 – 10.0"
    record["cases"]["brax_ppo_speed"]["comparison"]["ratio"] = -1.0
    assert any("comparison.ratio" in p for p in registry.record_problems(record))


def _sbx_run(seed: int, solved: bool, wall: float) -> dict:
    return {
        "seed": seed,
        "solved": solved,
        "steps_to_target": 9_000 if solved else None,
        "train_wall_s_to_target": wall / 2 if solved else None,
        "outer_wall_s": wall,
        "load_after": 3.0,
        "versions": {"jax": "0.10.2", "sbx": "0.28.0"},
    }


def _jaxsim_process(per_seed: float, solved: list[bool]) -> dict:
    return {"per_seed_wall_s": per_seed, "wall_s": per_seed * len(solved),
            "solved_per_seed": solved, "solved_all": all(solved), "load_before": 2.0,
            "load_after": 2.5}  # fmt: skip


def test_sbx_case_times_whole_processes_per_seed_and_its_record_validates(tmp_path, monkeypatch):
    # A venv that exists (its python a placeholder): the case runs, its processes faked.
    python = tmp_path / "envs" / "sbx" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.touch()
    monkeypatch.setenv("PEER_ENVS", str(tmp_path / "envs"))
    calls = []

    def fake_peer(peer, script, args, timeout_s):
        calls.append((peer, script, args))
        seed = int(args[args.index("--seed") + 1])
        return _sbx_run(seed, True, [30.0, 50.0][seed])

    def fake_jaxsim(case, seeds, smoke):
        return {"cold": _jaxsim_process(10.0, [True] * seeds),
                "warm": _jaxsim_process(4.0, [True] * seeds)}  # fmt: skip

    monkeypatch.setattr(measure, "run_peer", fake_peer)
    monkeypatch.setattr(sbx_case, "jaxsim_side", fake_jaxsim)
    out = tmp_path / "peers.json"
    assert measure.main(["--cases", "sbx_ppo", "--seeds", "2", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert registry.record_problems(record) == []
    case = record["cases"]["sbx_ppo"]
    # One SBX process per seed at rl-zoo's settings, each with the CartPole target.
    assert [c[2][:5] for c in calls] == [["ppo", "--env", "CartPole-v1", "--seed", str(s)]
                                         for s in (0, 1)]  # fmt: skip
    assert all("--target" in c[2] and "475.0" in c[2] for c in calls)
    # SBX's mean process wall per seed (40 s) over jaxsim's per seed, cold (10 s) and warm (4 s).
    assert case["comparison"]["ratio"] == pytest.approx(4.0)
    assert case["comparison"]["ratios"]["warm"] == pytest.approx(10.0)
    (row,) = report.rows(record)
    assert row[3] == "4x cold; 10x warm" and row[4] == ">= 2x: met" and "jax 0.10.2" in row[2]


def test_sbx_case_gives_no_ratio_when_a_seed_is_not_solved():
    runs = [_sbx_run(0, True, 30.0), _sbx_run(1, False, 80.0)]
    summary = sbx_case.sbx_summary(runs)
    assert summary["solved_per_seed"] == [True, False] and summary["per_seed_wall_s"] is None
    assert "--total-timesteps" in sbx_case.sbx_args("sbx_sac", 0, smoke=True)
    assert "-200.0" in sbx_case.sbx_args("sbx_sac", 0, smoke=False)


@pytest.mark.parametrize("script", ["peer_brax.py", "peer_rejax.py", "peer_sbx.py"])
def test_peer_scripts_import_nothing_from_this_repository(script):
    # They run under the peers' venvs, whose jax jaxsim does not support.
    tree = ast.parse((_REPO / "benchmarks" / "peers" / script).read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
    assert not [n for n in names if n.split(".")[0] in ("jaxsim", "agents", "benchmarks")]


def test_rejax_cases_run_both_sides_on_one_environment_to_one_target():
    from benchmarks.peers import rejax_case

    assert set(rejax_case.CASES) <= set(measure.CASES)
    breakout = rejax_case.CASES["rejax_ppo_breakout"]
    # gymnax's Breakout-MinAtar on both sides: jaxsim through its gymnax adapter.
    assert (breakout.env_id, breakout.peer_env) == ("gymnax/Breakout-MinAtar", "Breakout-MinAtar")
    assert breakout.target == rejax_case.BREAKOUT_TARGET == 5.0
    # Only the stop check's period is overridden: 8 updates of 16 x 64 steps, rejax's eval_freq.
    from agents.presets import config_for

    config = config_for(breakout.env_id, "ppo", **breakout.jaxsim_overrides)
    assert set(breakout.jaxsim_overrides) == {"log_every"}
    assert config.log_every * config.steps_per_update == 8192
    args = rejax_case.peer_args(breakout, 3, smoke=False)
    assert args == ["ppo", "--env", "Breakout-MinAtar", "--seeds", "3", "--target", "5.0"]
    smoke = rejax_case.peer_args(breakout, 1, smoke=True)
    assert smoke[-2:] == ["--total-timesteps", "8192"]
    cartpole = rejax_case.peer_args(rejax_case.CASES["rejax_dqn"], 2, smoke=False)
    assert cartpole[:3] == ["dqn", "--env", "CartPole-v1"] and "475.0" in cartpole


def _literal(node):
    """A literal written with `dict(key=...)` calls as well as literals."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "dict":
        return {k.arg: _literal(k.value) for k in node.keywords}
    if isinstance(node, ast.Dict):
        return {
            ast.literal_eval(k): _literal(v) for k, v in zip(node.keys, node.values, strict=True)
        }
    return ast.literal_eval(node)


def test_peer_rejax_publishes_breakout_settings_for_ppo_only():
    # peer_rejax.py runs in the rejax venv: read its settings without importing it.
    tree = ast.parse((_REPO / "benchmarks" / "peers" / "peer_rejax.py").read_text())
    found = {
        t.id: _literal(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name) and t.id == "BREAKOUT"
    }
    ppo = found["BREAKOUT"]["ppo"]
    assert set(found["BREAKOUT"]) == {"ppo"}
    # cleanRL's ppo.py defaults (rejax's README: its Breakout-MinAtar benchmark used them).
    assert (ppo["num_envs"], ppo["num_steps"], ppo["num_epochs"], ppo["num_minibatches"]) == (
        4, 128, 4, 4,
    )  # fmt: skip
    assert (ppo["learning_rate"], ppo["total_timesteps"]) == (2.5e-4, 500_000)
    assert ppo["env"] == "Breakout-MinAtar"
    assert ppo["eval_freq"] % (ppo["num_envs"] * ppo["num_steps"]) == 0


def _rejax_result(walls: list[float | None], first_chunk_s: float = 6.0) -> dict:
    return {
        "solved": [w is not None for w in walls],
        "solved_at": [w and {"step": 8192, "train_wall_s": w} for w in walls],
        "first_chunk_s": first_chunk_s,
    }


def test_rejax_summary_is_the_last_seeds_solve_over_the_seeds():
    from benchmarks.peers import rejax_case

    summary = rejax_case.peer_summary({**_rejax_result([9.0, 12.0, 10.5]), "init_s": 3.0}, 3)
    assert summary["train_wall_s_per_seed"] == pytest.approx(4.0)
    assert summary["train_wall_s_per_seed_without_first_chunk"] == pytest.approx(2.0)
    assert summary["train_wall_s_per_seed_init_in"] == pytest.approx(5.0)  # (12 + 3) / 3
    # A record from before init_s was kept: no init-in figure.
    assert rejax_case.peer_summary(_rejax_result([9.0]), 1)["train_wall_s_per_seed_init_in"] is None
    unsolved = rejax_case.peer_summary({**_rejax_result([9.0, None]), "init_s": 3.0}, 2)
    assert set(unsolved.values()) == {None}


def test_rejax_breakout_case_runs_its_sides_and_reports_a_row(tmp_path, monkeypatch):
    from benchmarks.peers import jaxsim_solve

    python = tmp_path / "envs" / "rejax" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.touch()
    monkeypatch.setenv("PEER_ENVS", str(tmp_path / "envs"))
    calls = []

    def fake_solve(algorithm, env_id, seeds, cache, target, budget=None, overrides=None):
        calls.append((algorithm, env_id, target, budget, overrides))
        per_seed = 3.0 if len(calls) == 1 else 1.5  # cold, then warm
        return {"seeds": seeds, "solved": [True] * seeds, "solved_all": True,
                "train_wall_s_per_seed": per_seed, "loop_compile_s": 6.0,
                "train_wall_s_per_seed_without_compile": 1.0, "compile_s": 7.0,
                "curve": [{"load": 2.0}]}  # fmt: skip

    def fake_peer(peer, script, args, timeout_s):
        calls.append((peer, script, args))
        return {**_rejax_result([10.0, 12.0]), "seeds": 2, "load_after": 2.5, "init_s": 3.0,
                "versions": {"jax": "0.10.2"}}  # fmt: skip

    monkeypatch.setattr(jaxsim_solve, "solve_preset", fake_solve)
    monkeypatch.setattr(measure, "run_peer", fake_peer)
    out = tmp_path / "peers.json"
    assert measure.main(["--cases", "rejax_ppo_breakout", "--seeds", "2", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert registry.record_problems(record) == []
    case = record["cases"]["rejax_ppo_breakout"]
    assert (case["env"], case["target"]) == ("gymnax/Breakout-MinAtar", 5.0)
    assert calls[0] == ("ppo", "gymnax/Breakout-MinAtar", 5.0, None, {"log_every": 8})
    assert calls[2][2][:3] == ["ppo", "--env", "Breakout-MinAtar"]
    # rejax: its last seed at 12 s plus its init's 3 s, over 2 seeds = 7.5 s per seed, as
    # jaxsim's 3 s cold and 1.5 s warm hold jaxsim's init.
    ratios = case["comparison"]["ratios"]
    assert (ratios["cold"], ratios["warm"]) == (pytest.approx(2.5), pytest.approx(5.0))
    assert ratios["without_compile"] == pytest.approx(3.0)  # (12 - 6) / 2 over 1
    assert ratios["cold_rejax_init_out"] == pytest.approx(2.0)  # 12 / 2 over 3
    (row,) = report.rows(record)
    assert row[0] == "rejax_ppo_breakout" and row[3].startswith("2.5x cold; 5x warm")
    assert row[4] == ">= 2x: met" and "jax 0.10.2" in row[2] and "2/2 seeds" in row[1]
    assert row[2].startswith("7.5 s"), row[2]  # rejax's time shown with its init, as compared


def _fake_brax_venv(tmp_path, monkeypatch) -> None:
    python = tmp_path / "envs" / "brax" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.touch()
    monkeypatch.setenv("PEER_ENVS", str(tmp_path / "envs"))


def test_ant_speed_case_keeps_brax_published_batch_and_splits_its_gap(tmp_path, monkeypatch):
    # ant: 4096 envs, batch 2048 x 32 minibatches x unroll 5 = 327,680 env steps per update.
    config = brax_case.equal_config("ant")
    assert (config.num_envs, config.num_steps) == (4096, 80)
    assert config.steps_per_update == brax_case.steps_per_update("ant") == 327_680
    _fake_brax_venv(tmp_path, monkeypatch)
    calls = []

    def fake_speed(env, chunk, repeats, shrink):
        calls.append(("jaxsim", env, chunk, repeats, shrink))
        return {"sps": 3_000.0, "compile_s": 90.0, "load": [2.0]}

    def fake_rollout(env, repeats, **overrides):
        calls.append(("jaxsim stepping", env, repeats, overrides))
        return {"sps": 4_000.0}

    def fake_peer(peer, script, args, timeout_s, python=None):
        calls.append((peer, script, args, python))
        if args[0] == "step":  # brax's own step: slower under jaxsim's (newer) jax
            jax_version = "0.10.2" if python else "0.9.2"
            return {"sps": 4_000.0 if python else 8_000.0, "num_envs": 4096,
                    "steps_per_call": 16, "versions": {"jax": jax_version}}  # fmt: skip
        return {"steady_sps": 6_000.0, "compile_s": 80.0, "load_after": 2.5,
                "versions": {"jax": "0.9.2"}}  # fmt: skip

    monkeypatch.setattr(brax_case, "jaxsim_speed", fake_speed)
    monkeypatch.setattr(brax_case, "rollout_only_speed", fake_rollout)
    monkeypatch.setattr(measure, "run_peer", fake_peer)
    out = tmp_path / "peers.json"
    assert measure.main(["--cases", "brax_ppo_speed_ant", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert registry.record_problems(record) == []
    case = record["cases"]["brax_ppo_speed_ant"]
    assert case["env"] == "ant" and case["timed_training_steps"] == 1
    # One timed step per side: brax's two compiling epochs plus one; no brax-network run on ant.
    brax_args = ["speed", "--env", "ant", "--epochs", "3", "--steps-per-epoch", "1"]
    step_args = ["step", "--env", "ant", "--num-envs", "4096", "--steps", "16", "--repeats", "3"]
    step_args += ["--episode-length", "1000"]
    assert calls == [
        ("jaxsim", "ant", 1, 1, 1),
        ("brax", "peer_brax.py", brax_args, None),
        # stepping alone: brax's step under its venv's jax and under jaxsim's, jaxsim's rollout
        ("brax", "peer_brax.py", step_args, None),
        ("brax", "peer_brax.py", step_args, sys.executable),
        ("jaxsim stepping", "ant", 3, {"num_steps": 16}),
    ]
    assert case["batch_shrink"] == 1  # brax's published batch, never shrunk outside smoke runs
    assert brax_case.equal_config("ant", shrink=16).num_steps == 80  # smoke: same steps per env
    # 0.5x = jax 0.5x (brax's step 4k vs 8k) x stepping 1x x loops (3k/4k) / (6k/8k) = 1x
    assert case["comparison"]["ratio"] == pytest.approx(0.5)
    assert case["comparison"]["split"] == pytest.approx({"jax": 0.5, "stepping": 1.0, "loops": 1.0})
    (row,) = report.rows(record)
    assert row[0] == "brax_ppo_speed_ant" and row[3] == "0.5x (jaxsim/brax)" and "not" in row[4]
    (line,) = report.split_lines(record)
    assert "jax 0.5x x stepping 1x x loops 1x" in line and "under jax 0.9.2" in line
    assert line in report.summary(record)


def _brax_sac_run(seed: int, wall: float | None) -> dict:
    at = {"step": 20_480, "train_walltime_s": wall, "confirm_return": 1000.0} if wall else None
    curve = [{"step": 0, "eval_return": 20.0, "train_walltime_s": 0.0},
             {"step": 20_480, "eval_return": 1000.0 if wall else 300.0,
              "train_walltime_s": wall or 99.0}]  # fmt: skip
    return {"solved": wall is not None, "at": at, "curve": curve, "seed": seed,
            "load_after": 2.0, "versions": {"jax": "0.9.2"}}  # fmt: skip


def _jaxsim_preset(seeds: int, wall: float, solved: bool = True) -> dict:
    return {"seeds": seeds, "solved": [solved] * seeds, "solved_all": solved,
            "train_wall_s_per_seed": wall / seeds, "compile_s": 20.0, "loop_compile_s": 10.0,
            "curve": [{"load": 1.5}]}  # fmt: skip


def test_brax_sac_case_is_brax_per_seed_over_jaxsim_per_seed(tmp_path, monkeypatch):
    from benchmarks.peers import jaxsim_solve

    _fake_brax_venv(tmp_path, monkeypatch)
    calls = []

    def fake_peer(peer, script, args, timeout_s):
        calls.append(args)
        seed = int(args[args.index("--seed") + 1])
        return _brax_sac_run(seed, [60.0, 100.0][seed])

    def fake_preset(algorithm, env_id, seeds, cache, target, budget=None):
        calls.append((algorithm, env_id, seeds, target, budget))
        return _jaxsim_preset(seeds, 40.0)

    monkeypatch.setattr(measure, "run_peer", fake_peer)
    monkeypatch.setattr(jaxsim_solve, "solve_preset", fake_preset)
    out = tmp_path / "peers.json"
    assert measure.main(["--cases", "brax_sac_solve", "--seeds", "2", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert registry.record_problems(record) == []
    # jaxsim's preset on the adapter, every seed at once; a brax process per seed, notebook's SAC.
    assert calls[0] == ("sac", "brax/inverted_pendulum", 2, 1000.0, None)
    assert [c[c.index("--seed") + 1] for c in calls[1:]] == ["0", "1"]
    assert all(c[:5] == ["sac-solve", "--env", "inverted_pendulum", "--sac-settings",
                         "test"] and "--num-timesteps" not in c for c in calls[1:])  # fmt: skip
    case = record["cases"]["brax_sac_solve"]
    # brax: mean(60, 100) = 80 s per seed; jaxsim: 40 s for two seeds = 20 s per seed.
    assert case["brax"]["train_wall_s_per_seed"] == pytest.approx(80.0)
    assert case["comparison"]["ratio"] == pytest.approx(4.0)
    (row,) = report.rows(record)
    assert row[3] == "4x (brax/jaxsim)" and row[4] == ">= 2x: met" and "2/2 seeds" in row[2]


def test_brax_sac_gives_no_ratio_unless_every_seed_solved_and_smoke_is_tiny():
    summary = brax_case.brax_sac_summary([_brax_sac_run(0, 60.0), _brax_sac_run(1, None)])
    assert summary["solved_per_seed"] == [True, False]
    assert summary["train_wall_s_per_seed"] is None
    assert summary["best_eval_return_per_seed"] == [1000.0, 300.0]
    smoke = brax_case.brax_sac_args(0, 1000.0, smoke=True)
    # Two training steps of brax's SAC test settings (64 envs, no prefill).
    assert smoke[smoke.index("--num-timesteps") + 1] == str(2 * 64)


def test_sac_preset_for_brax_pendulum_is_one_gradient_step_per_env_step_to_1000():
    from agents.presets import config_for, target_for

    config = config_for("brax/inverted_pendulum", "sac")
    assert config.gradient_steps == config.num_envs * config.num_steps == 64
    assert target_for("brax/inverted_pendulum", "sac") == brax_case.TARGETS["inverted_pendulum"]


def test_run_peer_records_the_interpreter_that_ran(tmp_path, monkeypatch):
    # A peer script run under jaxsim's own python (the stepping rows) names that python, not the
    # peer venv's, in the record's command; neither by its machine's path.
    monkeypatch.setattr(measure, "HERE", tmp_path)
    (tmp_path / "echo.py").write_text('import json, sys; print(json.dumps({"argv": sys.argv[1:]}))')
    _fake_brax_venv(tmp_path, monkeypatch)
    out = measure.run_peer("brax", "echo.py", ["step"], 60, python=sys.executable)
    assert out["argv"] == ["step"] and out["command"] == "python benchmarks/peers/echo.py step"
    with pytest.raises(OSError):  # the (empty, fake) venv python is what runs without `python`
        measure.run_peer("brax", "echo.py", ["step"], 60)


# ------------------------------------------------------------ a case past its time limit
_HANGING_PEER = """
import json, subprocess, sys, time
if sys.argv[1] == "dqn":  # hangs, and leaves a helper holding its output open
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    time.sleep(300)
print(json.dumps(RESULT))
"""


def _peer_venv_running_python(tmp_path, monkeypatch, peer: str) -> None:
    """`peer`'s venv python is this interpreter: its scripts (from tmp_path) really run."""
    python = tmp_path / "envs" / peer / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)
    monkeypatch.setenv("PEER_ENVS", str(tmp_path / "envs"))


def test_a_case_past_its_limit_is_recorded_as_timed_out_and_the_run_goes_on(
    tmp_path, monkeypatch, capsys
):
    import time

    from benchmarks.peers import jaxsim_solve

    _peer_venv_running_python(tmp_path, monkeypatch, "rejax")
    result = {**_rejax_result([10.0]), "seeds": 1, "init_s": 1.0, "versions": {"jax": "0.10.2"}}
    (tmp_path / "peer_rejax.py").write_text(_HANGING_PEER.replace("RESULT", repr(result)))
    monkeypatch.setattr(measure, "HERE", tmp_path)

    def solve(algorithm, env_id, seeds, cache, target, budget=None, overrides=None):
        if env_id == "CartPole-v1" and algorithm == "ppo":
            time.sleep(300)  # jaxsim's own side stuck, in this process
        return {"seeds": seeds, "solved": [True], "solved_all": True,
                "train_wall_s_per_seed": 2.0, "loop_compile_s": 1.0,
                "train_wall_s_per_seed_without_compile": 1.0, "compile_s": 1.0,
                "curve": [{"load": 1.0}]}  # fmt: skip

    monkeypatch.setattr(jaxsim_solve, "solve_preset", solve)
    out = tmp_path / "peers.json"
    cases = "rejax_ppo,rejax_dqn,rejax_ppo_breakout"
    argv = ["--cases", cases, "--seeds", "1", "--out", str(out), "--case-timeout-s", "1.5"]
    started = time.monotonic()
    assert measure.main(argv) == 1  # a timed-out case fails the run, after every case ran
    assert time.monotonic() - started < 30
    record = json.loads(out.read_text())
    assert registry.record_problems(record) == []
    by_case = record["cases"]
    for name in ("rejax_ppo", "rejax_dqn"):  # jaxsim's side stuck; the peer process stuck
        assert "ran past its 1.5 s limit" in by_case[name]["timed_out"], by_case[name]
        assert by_case[name]["limit_s"] == 1.5
    assert by_case["rejax_ppo_breakout"]["comparison"]["ratio"] == pytest.approx(5.5)
    rows = {row[0]: row for row in report.rows(record)}
    assert rows["rejax_dqn"][2].startswith("timed out: ran past its 1.5 s limit")
    assert "FAILED: rejax_ppo, rejax_dqn" in capsys.readouterr().out
    assert not out.with_suffix(".partial.jsonl").exists()


def test_a_case_stuck_where_no_signal_reaches_still_ends_the_run_with_its_record(tmp_path):
    import subprocess

    envs = tmp_path / "envs" / "rejax" / "bin"
    envs.mkdir(parents=True)
    (envs / "python").touch()
    out = tmp_path / "peers.json"
    # jaxsim's side blocks the limit's signal, as a wait inside XLA would not see it.
    code = f"""
import signal, sys, time
sys.path.insert(0, {str(_REPO)!r})
from benchmarks.peers import jaxsim_solve, measure

def stuck(*args, **kwargs):
    signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGALRM}})
    time.sleep(300)

jaxsim_solve.solve_preset = stuck
measure.HARD_STOP_GRACE_S = 1.0
measure.main(["--cases", "rejax_ppo,rejax_dqn", "--out", {str(out)!r}, "--case-timeout-s", "1"])
"""
    env = {**__import__("os").environ, "PEER_ENVS": str(tmp_path / "envs")}
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    record = json.loads(out.read_text())
    assert registry.record_problems(record) == []
    assert "was stuck 1 s more: the run stopped" in record["cases"]["rejax_ppo"]["timed_out"]
    assert "not run: the run stopped when rejax_ppo hung" in record["cases"]["rejax_dqn"]["skipped"]


@pytest.mark.parametrize("value", ["0", "-5"])
def test_a_non_positive_case_timeout_is_refused_naming_the_flag(value, tmp_path, capsys):
    with pytest.raises(SystemExit):
        measure.main([f"--case-timeout-s={value}", "--out", str(tmp_path / "x.json")])
    assert "argument --case-timeout-s: expected a finite number" in capsys.readouterr().err


def test_a_peer_venvs_command_names_no_machine_path(tmp_path, monkeypatch):
    monkeypatch.setattr(measure, "HERE", tmp_path)
    (tmp_path / "echo.py").write_text('import json, sys; print(json.dumps({"argv": sys.argv[1:]}))')
    _peer_venv_running_python(tmp_path, monkeypatch, "brax")
    out = measure.run_peer("brax", "echo.py", ["step", "--out", str(_REPO / "runs" / "x")], 60)
    assert out["command"] == "$PEER_ENVS/brax/bin/python benchmarks/peers/echo.py step --out runs/x"
