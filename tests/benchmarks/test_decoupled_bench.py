"""benchmarks.decoupled: the record's sides, ratios, summary, schema and report section."""

from pathlib import Path

import pytest

from benchmarks.decoupled import measure
from benchmarks.decoupled.suite import SUITE
from benchmarks.report.records import Record


def _run(seed, wall, checks, steps):
    return {"seed": seed, "wall_s": wall, "check_wall_s": checks, "solved": steps is not None,
            "steps_to_target": steps, "rejected_checks": [], "load_1min_before": 2.0,
            "load_1min_after": 2.5}  # fmt: skip


def _record(sb3_steps=(20_000, 30_000, 25_000)):
    ours = measure.side([_run(s, w, 1.0, 10_000) for s, w in enumerate((3.0, 5.0, 4.0))])
    cold = measure.side([_run(s, w, 1.0, 10_000) for s, w in enumerate((6.0, 8.0, 7.0))])
    sb3 = measure.side([_run(s, 40.0, 5.0, x) for s, x in enumerate(sb3_steps)])
    multi = {"seeds": 3, "wall_s": 9.0, "per_seed_wall_s": 3.0, "all_solved": True,
             "per_seed_wall_s_excluding_checks": 2.0, "solved_per_seed": [True] * 3,
             "steps_to_target_per_seed": [10_000] * 3, "check_wall_s": 3.0,
             "load_1min_before": 2.0, "load_1min_after": 2.0}  # fmt: skip
    jaxsim = {"default": {"flags": [], "cold": cold, "warm": ours, "warm_seeds": multi}}
    return {
        "benchmark": "decoupled",
        "provenance": {"command": "python -m benchmarks.decoupled", "cpu_count": 2},
        "env": measure.ENV,
        "jaxsim_command": "python -m agents.train ppo ...",
        "sb3_command": "python -m benchmarks.baselines.ppo_sb3 ...",
        "solved_rule": "the rule",
        "jaxsim": jaxsim,
        "sb3": sb3,
        "comparison": {"default": measure.compare(jaxsim["default"], sb3)},
    }


def test_ratios_are_medians_per_seed_and_need_every_seed_solved():
    cmp = _record()["comparison"]["default"]
    assert cmp["speedup_warm"] == pytest.approx(40.0 / 4.0)
    assert cmp["speedup_cold"] == pytest.approx(40.0 / 7.0)
    assert cmp["speedup_warm_excluding_checks"] == pytest.approx(35.0 / 3.0)
    assert cmp["speedup_warm_seeds"] == pytest.approx(40.0 / 3.0)
    assert cmp["target_met_warm"] is True and cmp["steps_ratio"] == pytest.approx(2.5)
    unsolved = _record(sb3_steps=(20_000, None, 25_000))
    assert unsolved["sb3"]["median_wall_s_per_seed"] is None
    assert unsolved["comparison"]["default"]["speedup_warm"] is None
    assert unsolved["comparison"]["default"]["target_met_warm"] is None


def test_record_passes_its_schema_renders_and_a_contradiction_is_named():
    record = _record()
    assert SUITE.problems(record) == []
    text = SUITE.section(Record(Path("decoupled_cpu2_x.json"), record), Path("."), None)
    assert "**10x**" in text and "SB3 on EnvPool" in text and "--seeds 3" in text
    assert "10.00x" in measure.summary(record)
    record["sb3"]["solved_per_seed"] = [True, False, True]
    assert any("sb3.solved_per_seed" in p for p in SUITE.problems(record))
