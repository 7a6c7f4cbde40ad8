"""The throughput suite's memory floor: bytes per step from traced shapes, a measured bandwidth,
each figure as a fraction of its floor in the record, the schema and the report."""

import json
import math
import sys
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

import jaxsim  # noqa: E402
from benchmarks.harness.paths import RESULTS_DIR  # noqa: E402
from benchmarks.harness.registry import record_problems  # noqa: E402
from benchmarks.report.records import Record  # noqa: E402
from benchmarks.rollout_throughput import measure as rt  # noqa: E402
from benchmarks.rollout_throughput.floor import copy_bandwidth, step_bytes  # noqa: E402
from benchmarks.rollout_throughput.suite import throughput_section  # noqa: E402


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def test_step_bytes_of_cartpole():
    # CartPole's rollout carry: x, x_dot, theta, theta_dot, time (20 B), obs (16), episode
    # return and length (8); "all" writes obs, next_obs (32), action, reward, return, length
    # (16) and two flags (2); "rewards" reward and two flags.
    assert step_bytes("CartPole-v1", "all") == {
        "state_read": 44,
        "state_written": 44,
        "outputs_written": 50,
        "total": 138,
    }
    assert step_bytes("CartPole-v1", "rewards")["total"] == 88 + 6
    assert step_bytes("CartPole-v1", "physics") == {
        "state_read": 20,
        "state_written": 20,
        "outputs_written": 0,
        "total": 40,
    }
    with pytest.raises(ValueError, match="mode must be one of"):
        step_bytes("CartPole-v1", "everything")


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "MountainCarContinuous-v0", "Acrobot-v1"])
def test_step_bytes_follow_each_envs_spaces(env_id):
    env = jaxsim.make(env_id)
    params = env.default_params
    obs = 4 * math.prod(env.observation_space(params).shape)
    action = 4 * math.prod(env.action_space(params).shape)
    every, rewards = step_bytes(env_id, "all"), step_bytes(env_id, "rewards")
    assert every["state_read"] == rewards["state_read"] >= obs + 8
    # What "all" keeps beyond "rewards": obs and next_obs, the action, return and length.
    assert every["outputs_written"] - rewards["outputs_written"] == 2 * obs + action + 8


def test_copy_bandwidth_is_a_median_of_repeats():
    bw = copy_bandwidth(repeats=3, nbytes=1 << 20)
    assert len(bw["samples"]) == 3 and bw["bytes_per_s"] == sorted(bw["samples"])[1] > 0
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        copy_bandwidth(repeats=0)


def test_the_record_carries_floors_and_the_targets_are_fractions(tmp_path):
    out = tmp_path / "rt.json"
    impls = "jaxsim,jaxsim_reuse,jaxsim_rewards,physics_only"
    argv = ["--num-envs", "4096", "--impls", impls, "--repeats", "1", "--min-time", "0"]
    assert rt.main([*argv, "--steps-per-call", "256", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record_problems(record) == []
    bw = record["memory_bandwidth"]
    assert bw["bytes_per_s"] > 0 and len(bw["samples"]) == 14  # 7 before, 7 after the rows
    points = {p["impl"]: p for p in record["results"]}
    assert points["jaxsim_reuse"]["checks"]["buffers_reused"]["pass"]  # out= the last call's
    floors = [("jaxsim", 138), ("jaxsim_reuse", 138), ("jaxsim_rewards", 94), ("physics_only", 40)]
    for impl, total in floors:
        floor = points[impl]["floor"]
        assert floor["bytes_per_step"]["total"] == total
        assert floor["steps_per_s"] == pytest.approx(bw["bytes_per_s"] / total)
        assert floor["fraction"] == pytest.approx(
            points[impl]["steps_per_s"]["median"] / floor["steps_per_s"]
        )
    targets = {t["name"]: t for t in record["targets"]}
    memory = targets["jaxsim of memory floor"]
    assert memory["value"] == points["jaxsim"]["floor"]["fraction"] and memory["min"] == 0.6
    assert memory["status"] in ("pass", "fail")
    compute = targets["jaxsim_rewards of compute floor (physics_only)"]
    ratio = (
        points["jaxsim_rewards"]["steps_per_s"]["median"]
        / points["physics_only"]["steps_per_s"]["median"]
    )
    assert compute["value"] == pytest.approx(ratio) and compute["min"] == 0.8
    assert targets["jaxsim / gymnasium_numpy"]["min"] == 3.0  # still a ratio: not measured here
    text = throughput_section(Record(out, record), tmp_path, None)
    assert "GB/s read + written" in text
    row = next(x for x in text.splitlines() if x.startswith("| jaxsim (scan) ÷ memory floor"))
    assert _cells(row)[1] == "138" and _cells(row)[2].endswith("%")
    assert "rewards only ÷ compute floor (physics only)" in text


def test_a_floor_is_checked_and_old_records_without_one_still_render(tmp_path):
    # A record as written before the floors: a published one, its floors taken out.
    old = json.loads((RESULTS_DIR / "rollout_throughput_cpu2_vm_quick.json").read_text())
    old.pop("memory_bandwidth", None)
    for p in old["results"]:
        p.pop("floor", None)
    assert record_problems(old) == []
    text = throughput_section(Record(RESULTS_DIR / "x.json", old), RESULTS_DIR, None)
    assert "Memory floor: — (not recorded in this record)." in text
    row = next(x for x in text.splitlines() if x.startswith("| jaxsim (scan) ÷ memory floor"))
    assert set(_cells(row)[1:]) == {"—"}
    # A floor needs its bandwidth, and a finite positive fraction; the problem names the field.
    point = next(p for p in old["results"] if p["impl"] == "jaxsim" and p["status"] == "ok")
    point["floor"] = {"bytes_per_step": {"total": 138}, "steps_per_s": 1e8, "fraction": 0.5}
    assert record_problems(old) == ["lacks field 'memory_bandwidth.bytes_per_s'",
                                    "lacks field 'memory_bandwidth.samples'"]  # fmt: skip
    old["memory_bandwidth"] = {"bytes_per_s": 1e10, "samples": [1e10]}
    assert record_problems(old) == []
    point["floor"]["fraction"] = float("nan")
    (problem,) = record_problems(old)
    assert "floor.fraction" in problem and "impl=jaxsim" in problem
