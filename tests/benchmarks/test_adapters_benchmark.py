"""The adapters benchmark runs end to end at tiny sizes and writes a record the report accepts."""

import json

import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks.adapters import loops as loops
from benchmarks.adapters import measure as adapters
from benchmarks.harness.optional import Skipped
from benchmarks.harness.registry import record_problems


def test_tiny_run_writes_a_valid_record(tmp_path):
    pytest.importorskip("gymnax", reason="gymnax not installed: pip install 'jaxsim-rl[gymnax]'")
    out = tmp_path / "adapters.json"
    argv = [
        "--families",
        "gymnax",
        "--num-envs",
        "2,4",
        "--gymnax-steps-per-call",
        "8",
        "--min-steps",
        "3",
        "--repeats",
        "2",
        "--out",
        str(out),
    ]
    assert adapters.main(argv) == 0
    record = json.loads(out.read_text())
    assert record["benchmark"] == "adapters" and record_problems(record) == []
    assert record["provenance"]["versions"]["gymnax"]
    points = {(p["impl"], p["num_envs"]): p for p in record["results"]}
    assert set(points) == {(impl, n) for impl in ("jaxsim", "gymnax") for n in (2, 4)}
    for (_, n), p in points.items():
        assert p["status"] == "ok" and p["steps"] == max(3, 8 // n), p
        assert p["timing"]["compiles_during_timing"] == 0
        # first call + warmup + 2 samples, each 3 steps of a chained run, all followed
        assert p["checks"]["pass"] and p["checks"]["steps"] == 4 * p["steps"]
        assert p["checks"]["episodes_ended"] > 0  # a random Breakout player loses in ~10 steps
    targets = record["targets"]
    assert [(t["env_id"], t["num_envs"]) for t in targets] == [
        ("gymnax/Breakout-MinAtar", 2),
        ("gymnax/Breakout-MinAtar", 4),
    ]
    for t in targets:
        ratio = (
            points["jaxsim", t["num_envs"]]["steps_per_s"]["median"]
            / points["gymnax", t["num_envs"]]["steps_per_s"]["median"]
        )
        assert t["value"] == pytest.approx(ratio) and t["status"] in ("pass", "fail")


def test_a_missing_library_is_recorded_as_skipped(tmp_path, monkeypatch):
    pytest.importorskip("gymnax", reason="gymnax not installed: pip install 'jaxsim-rl[gymnax]'")

    def missing(*args, **kwargs):
        raise Skipped("gymnax is not importable: no module named gymnax")

    monkeypatch.setattr(loops, "gymnax_runner", missing)
    out = tmp_path / "a.json"
    assert adapters.main(["--families", "gymnax", "--num-envs", "2", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record_problems(record) == [] and record["targets"] == []
    assert [(p["status"], p["reason"]) for p in record["results"]] == [
        ("skipped", "gymnax is not importable: no module named gymnax")
    ]


def _runner(done, truncated, steps):
    runner = loops.Runner("test", done.shape[1], steps, lambda key: None)
    for t in range(0, done.shape[0], steps):
        d, tr = done[t : t + steps], truncated[t : t + steps]
        runner.history.append((jnp.zeros(d.shape), d, tr))
    return runner


def test_episode_check_follows_episodes_across_calls():
    limit = 3
    # Env 0 truncates every 3 steps; env 1 terminates at steps 2 and 4 (episodes of 2 and 2).
    done = np.array([[0, 0], [0, 1], [1, 0], [0, 1], [0, 0], [1, 0]], bool)
    truncated = np.array([[0, 0], [0, 0], [1, 0], [0, 0], [0, 0], [1, 0]], bool)
    seen = loops.episode_check(_runner(done, truncated, 2), limit)
    assert seen["episodes_ended"] == 4 and seen["truncations"] == 2 and seen["steps"] == 6
    assert seen["longest_episode"] == 3 and seen["reset_step_share"] == pytest.approx(4 / 6)
    early = truncated.copy()
    early[1, 1] = True  # truncated after 2 steps with a limit of 3
    with pytest.raises(AssertionError, match="truncated before the limit"):
        loops.episode_check(_runner(done, early, 2), limit)
    with pytest.raises(AssertionError, match="outlasted"):
        loops.episode_check(_runner(done, truncated, 2), 2)
