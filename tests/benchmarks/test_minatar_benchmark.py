"""The minatar suite runs end to end at tiny sizes and writes a record the report accepts."""

import json

import numpy as np
import pytest

from benchmarks.harness.registry import SUITES, record_problems
from benchmarks.harness.suite import Plan
from benchmarks.minatar import loops
from benchmarks.minatar import measure as minatar
from benchmarks.report.records import Record


def test_tiny_run_writes_a_valid_record(tmp_path):
    pytest.importorskip("gymnax", reason="gymnax not installed: pip install 'jaxsim-rl[gymnax]'")
    pytest.importorskip("minatar", reason="the original minatar package is not installed")
    out = tmp_path / "minatar.json"
    # The adapter's loop is the gymnax one through jaxsim.rollout (test_adapters_benchmark);
    # leaving it out saves a compile.
    argv = "--games Breakout --impls dynamics,gymnax,original --num-envs 3 --steps 2 --repeats 2 "
    argv += f"--original-envs 2 --original-steps 2 --original-repeats 1 --out {out}"
    assert minatar.main(argv.split()) == 0
    record = json.loads(out.read_text())
    assert record["benchmark"] == "minatar" and record_problems(record) == []
    assert {p["impl"]: p["status"] for p in record["results"]} == dict.fromkeys(
        ("jaxsim", "dynamics", "gymnax", "original"), "ok"
    )
    for p in record["results"]:
        kept = None if p["impl"] == "dynamics" else [2, p["num_envs"], 10, 10, 4]
        assert p["checks"]["obs_shape"] == kept, p["impl"]
        if p["impl"] != "original":
            assert p["timing"]["compiles_during_timing"] == 0
    targets = {t["name"]: t for t in record["targets"]}
    assert set(targets) == {
        "jaxsim / gymnax", "jaxsim / original", "no obs / scan", "no obs / original"
    }  # fmt: skip
    assert targets["jaxsim / gymnax"]["min"] == 3.0 and targets["jaxsim / original"]["min"] == 100
    for name, t in targets.items():  # the game without observations is a bound, not a result
        want = ("info",) if name.startswith("no obs") else ("pass", "fail")
        assert t["status"] in want and t["value"] > 0, name
    assert targets["no obs / original"]["min"] is None
    text = SUITES["minatar"].section(Record(out, record), tmp_path, None)
    assert "| Breakout" in text and "jaxsim / original" in text and "| adapter" not in text
    assert "no obs / original" in text


def test_check_outputs_rejects_cells_other_than_0_and_1():
    obs = np.zeros((2, 3, 10, 10, 4), np.float32)
    good = (obs, np.zeros((2, 3)), np.zeros((2, 3), bool))
    assert loops.check_outputs("x", good, 2, 3, 4)["pass"]
    with pytest.raises(AssertionError, match="other than 0 and 1"):
        loops.check_outputs("x", (obs + 0.5, *good[1:]), 2, 3, 4)
    with pytest.raises(AssertionError, match="not finite"):
        loops.check_outputs("x", (obs, np.full((2, 3), np.nan), good[2]), 2, 3, 4)
    with pytest.raises(AssertionError, match="shape"):
        loops.check_outputs("x", good, 2, 3, 7)
    assert loops.check_outputs("x", (None, *good[1:]), 2, 3, 4)["obs_shape"] is None


def test_smoke_plan_is_tiny_and_follows_the_baselines():
    args = SUITES["minatar"].args
    smoke = args(Plan("smoke", frozenset({"gymnax"}), on_gpu=False))
    assert smoke[:2] == ["--impls", "gymnax,adapter"] and "--num-envs" in smoke
    quick = ["--impls", "none", "--quick", "--games", "Breakout"]  # the main job: one game
    assert args(Plan("quick", frozenset(), on_gpu=False)) == quick
    assert args(Plan("full", frozenset(), on_gpu=True)) == ["--impls", "reuse,dynamics,fused"]


def test_bad_arguments_name_the_flag():
    with pytest.raises(SystemExit):
        minatar.parse_args(["--games", "Pong"])
    with pytest.raises(SystemExit):
        minatar.parse_args(["--num-envs", "0"])


def test_sizes_traffic_model_counts_each_games_grid():
    from benchmarks.fusion_sizes.measure import minatar_traffic

    games = ("MinAtar/Breakout-v0", "MinAtar/Freeway-v0")  # 4 and 7 channels; tracing is slow
    rows = {r["env_id"]: r for r in minatar_traffic("all", 8, (4,), 16, games)}
    assert set(rows) == set(games) and rows[games[1]]["channels"] == 7
    for env_id, r in rows.items():
        cells = 100 * r["channels"]  # bool [10, 10, C]: a byte a cell
        m = r["model"]
        # obs and next_obs, and the action, reward and flags' few bytes
        assert 2 * cells < m["output_bytes_per_step"] <= 2 * cells + 32, env_id
        assert m["scan_bytes_per_step"] > m["output_bytes_per_step"]
        # the kernel's packed words, written and read back: 2 x 40 C per kept grid
        fused = m["fused_bytes_per_step"][4]
        assert fused > 2 * cells + 2 * 2 * 40 * r["channels"]
    (rewards,) = minatar_traffic("rewards", 8, (4,), 16, games[:1])
    assert rewards["model"]["output_bytes_per_step"] == 6
