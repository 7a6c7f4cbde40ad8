"""benchmarks.front.measure's host-stepped fronts: the single-environment front against
Gymnasium's in paired per-repeat ratios, the vector front's transitions, bad input."""

import statistics
import sys
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from benchmarks.front import measure as front  # noqa: E402


@pytest.mark.parametrize("game", front.GYMNASIUM_IDS)
def test_single_env_front_is_timed_against_gymnasium_in_pairs(game):
    pytest.importorskip("gymnasium")
    m = front.measure_case(game, "make", 1, steps=60, repeats=3)
    ours, theirs = (m["steps_per_s"][side]["samples"] for side in ("jaxsim", "original"))
    assert len(ours) == len(theirs) == len(m["ratio_samples"]) == 3
    # The figure is the median of the per-repeat ratios, not a ratio of medians.
    assert m["ratio_samples"] == pytest.approx([a / b for a, b in zip(ours, theirs, strict=True)])
    assert m["jaxsim_over_original"] == statistics.median(m["ratio_samples"])
    if game == "CartPole":  # 5 x 60 random steps (untimed, 3 repeats, 1 compile), episodes of ~22
        assert min(m["episodes_ended"].values()) >= 4


def test_the_vector_front_checks_transitions_before_timing():
    pytest.importorskip("gymnasium")
    check = front.check_front_transitions(8, steps=30)
    assert check["pass"] and check["transitions_compared"] > 200


def test_the_front_rejects_bad_counts_before_running(capsys):
    bad = (
        ["--games", "CartPole", "--steps", "0"],
        ["--games", "CartPole", "--repeats", "0"],
        ["--games", "CartPol"],
    )
    for argv in bad:
        with pytest.raises(SystemExit) as e:
            front.main(argv)
        assert e.value.code == 2
    assert "CartPol" in capsys.readouterr().err
