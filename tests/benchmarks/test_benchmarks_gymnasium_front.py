"""benchmarks.micro.gymnasium_front's single-environment front: paired per-repeat ratios, bad
input."""

import statistics
import sys
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from benchmarks.micro import gymnasium_front  # noqa: E402


@pytest.mark.parametrize("env_id", gymnasium_front.SINGLE_ENV_IDS)
def test_single_env_front_is_timed_against_gymnasium_in_pairs(env_id):
    pytest.importorskip("gymnasium")
    m = gymnasium_front.measure_single(env_id, steps=60, repeats=3)
    ours, theirs = m["step_s"]["jaxsim"]["samples"], m["step_s"]["gymnasium"]["samples"]
    assert len(ours) == len(theirs) == len(m["ratio_samples"]) == 3
    # The figure is the median of the per-repeat ratios, not a ratio of medians.
    assert m["ratio_samples"] == [a / b for a, b in zip(ours, theirs, strict=True)]
    assert m["jaxsim_over_gymnasium"] == statistics.median(m["ratio_samples"])
    if env_id == "CartPole-v1":  # 4 x 60 random steps (warm-up, 3 repeats), episodes of ~22
        assert min(m["episodes_ended"].values()) >= 4


def test_single_env_front_rejects_bad_counts_before_running(capsys):
    bad = (
        ["--configs", "single", "--single-steps", "0"],
        ["--configs", "single", "--repeats", "0"],
        ["--configs", "singel"],
    )
    for argv in bad:
        with pytest.raises(SystemExit) as e:
            gymnasium_front.main(argv)
        assert e.value.code == 2
    assert "single" in capsys.readouterr().err
