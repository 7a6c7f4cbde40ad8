"""benchmarks/ppo/ runs end to end at tiny sizes and writes a strict, complete JSON record."""

import json
import sys
from pathlib import Path

# benchmarks/ is a top-level folder of the repository, not part of the installed package.
_REPO = str(Path(__file__).resolve().parents[2])
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

from benchmarks.ppo import measure as bench  # noqa: E402


def test_ppo_benchmark_quick(tmp_path):
    out = tmp_path / "ppo.json"
    argv = ["--quick", "--envs", "CartPole-v1", "--no-sb3", "--out", str(out)]
    assert bench.main(argv) == 0
    record = json.loads(out.read_text())
    assert record["quick"] is True
    assert {"commit", "command", "device_kind", "versions"} <= set(record["provenance"])
    run = record["jaxsim"]["CartPole-v1"]
    assert run["total_steps_per_seed"] == 4096 and run["curve"]
    assert run["target"] == 475.0 and isinstance(run["reached"], bool)
    # Solved means solved: the record says per seed, as eval.json does, and agrees with itself.
    assert run["solved_per_seed"] == [s is not None for s in run["per_seed_steps_to_target"]]
    assert isinstance(run["rejected_checks"], list) and "solved_rule" in run
    assert record["sb3"] == {"skipped": "--no-sb3"}
    assert record["gpu_training_sps"]["status"] in ("unmeasured", "measured")
    assert (tmp_path / "ppo_CartPole-v1.png").exists()
    assert not list(tmp_path.glob("*.partial.jsonl"))
