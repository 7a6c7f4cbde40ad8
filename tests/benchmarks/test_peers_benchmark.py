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
from benchmarks.peers import brax_case, measure, report  # noqa: E402


def test_absent_peer_venvs_are_skipped_with_their_setup_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PEER_ENVS", str(tmp_path / "no-envs"))
    out = tmp_path / "peers.json"
    assert measure.main(["--cases", "brax_ppo_speed,rejax_ppo", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    for case, peer in (("brax_ppo_speed", "brax"), ("rejax_ppo", "rejax")):
        why = record["cases"][case]["skipped"]
        assert f"bash benchmarks/peers/setup_envs.sh {peer}" in why and "no-envs" in why
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


@pytest.mark.parametrize("script", ["peer_brax.py", "peer_rejax.py"])
def test_peer_scripts_import_nothing_from_this_repository(script):
    # They run under the peers' venvs, whose jax jaxsim does not support.
    tree = ast.parse((_REPO / "benchmarks" / "peers" / script).read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
    assert not [n for n in names if n.split(".")[0] in ("jaxsim", "agents", "benchmarks")]
