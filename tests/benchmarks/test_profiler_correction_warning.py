"""The profiler's table warns when its overhead-corrected time misses the held-out
uninstrumented time by more than the stated bound, instead of printing the time as if sound."""

import pytest

from jaxsim.profiler._program import _check_baseline
from jaxsim.profiler._report import CORRECTION_ERROR_BOUND, ProfileReport, Row


def _report(mode: str = "program", corrected_error: float | None = None) -> ProfileReport:
    row = Row("step", "phase", 0.5, 0.1, 0.6, 0.2, 10.0)
    return ProfileReport(
        name="fn",
        phases=["step"],
        iterations=1,
        backend="cpu",
        device_kind="cpu",
        wall_s=1.0,
        wall_samples_s=[1.0],
        traced_wall_s=1.4,
        rows=[row, Row("(python)", "host", 0.0, 0.4, 0.0, 0.6, 0.0)],
        dispatches_per_iteration=1.0,
        executables={"jit_fn": 1.0},
        op_events_per_iteration=10.0,
        overhead={
            "traced_s": 1.4,
            "corrected_s": 1.0,
            "model_corrected_s": 1.1,
            "corrected_error": corrected_error,
        },
        coverage={},
        estimated_fraction=0.0,
        unscoped_paths={},
        mode=mode,
    )


def test_a_correction_that_misses_held_out_runs_beyond_the_bound_is_warned_of():
    report = _report()
    # Held-out uninstrumented runs: 0.4 s each, and the corrected time is 1.0 s (+150%).
    baseline = [{"wall_s": 0.4, "compile_s": 0.0}] * 3
    report.baseline = _check_baseline(baseline, report)
    assert report.overhead["corrected_error"] == pytest.approx(1.5)
    table = report.format_table()
    first = table.splitlines()[1]
    assert first.startswith("WARNING: the overhead-corrected time misses the held-out")
    assert "+150.0%, beyond the +-5% bound" in first
    assert report.to_dict()["correction_warning"] == first


@pytest.mark.parametrize("mode", ["program", "callable"])
def test_a_correction_within_the_bound_or_unchecked_prints_no_warning(mode):
    for err in (None, CORRECTION_ERROR_BOUND / 2, -CORRECTION_ERROR_BOUND):
        report = _report(mode, err)
        assert report.correction_warning is None
        assert "WARNING" not in report.format_table()
    assert "-6.0%" in _report(mode, -0.06).format_table().splitlines()[1]
