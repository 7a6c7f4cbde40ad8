"""A pytest plugin that keeps a JSON summary of the run up to date after every test.

`python -m pytest -p benchmarks.gpu.pytest_progress --tests-json OUT.json ...` rewrites OUT.json
(atomically) as each test finishes: a run killed by its timeout still leaves every finished
test's outcome, where JUnit XML is only written at the end. Its "status" is "incomplete" until
the session ends, then "ran" ("interrupted" after the SIGINT a phase's timeout sends). Modules
that could not be collected count as errors, or as skipped; warnings are recorded, not raised.
Under xdist the controller alone writes.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from atomicfiles import finite_json, write_json_atomic

MESSAGE_CHARS = 2000


def pytest_addoption(parser):
    parser.addoption("--tests-json", default=None, help="keep a JSON summary of outcomes here")


class Progress:
    """The outcomes so far, written out whole after each change."""

    def __init__(self, path: str):
        self.path = path
        self.started = time.perf_counter()
        self.tests: list[dict[str, Any]] = []
        self.warnings: dict[str, int] = {}  # "Category: message" -> times seen
        self.write("incomplete")

    def write(self, status: str, exit_status: int | None = None) -> None:
        counts: dict[str, int] = {}
        for test in self.tests:
            counts[test["outcome"]] = counts.get(test["outcome"], 0) + 1
        record = {
            "status": status,
            "exit_status": exit_status,
            "wall_s": round(time.perf_counter() - self.started, 1),
            "counts": counts,
            "tests": self.tests,
            "warnings": [{"warning": w, "count": n} for w, n in self.warnings.items()],
        }
        write_json_atomic(self.path, finite_json(record))

    def add(self, report, outcome: str, seconds: float) -> None:
        message = None if outcome == "passed" else (report.longreprtext or "")[:MESSAGE_CHARS]
        test = {"test": report.nodeid, "outcome": outcome, "seconds": seconds}
        self.tests.append({**test, "message": message or None})
        self.write("incomplete")

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report):
        outcome = _outcome(report)
        if outcome is not None:
            self.add(report, outcome, report.duration)

    @pytest.hookimpl
    def pytest_collectreport(self, report):
        if report.failed or report.skipped:  # a module that could not be imported, or skipped
            self.add(report, "error" if report.failed else "skipped", 0.0)

    @pytest.hookimpl
    def pytest_warning_recorded(self, warning_message, when, nodeid, location):
        text = f"{warning_message.category.__name__}: {warning_message.message}"[:MESSAGE_CHARS]
        self.warnings[text] = self.warnings.get(text, 0) + 1

    @pytest.hookimpl
    def pytest_sessionfinish(self, session, exitstatus):
        status = "interrupted" if exitstatus == pytest.ExitCode.INTERRUPTED else "ran"
        self.write(status, int(exitstatus))


def _outcome(report) -> str | None:
    """passed, failed, skipped, xfailed, xpassed or error; None for a phase that says nothing."""
    xfail = hasattr(report, "wasxfail")
    if report.when == "call":
        if xfail:
            return "xpassed" if report.passed else "xfailed"
        return report.outcome
    if report.failed:
        return "error"  # in setup or teardown
    if report.when == "setup" and report.skipped:
        return "xfailed" if xfail else "skipped"
    return None


def pytest_configure(config):
    path = config.getoption("--tests-json")
    # Under xdist only the controller writes: every worker's reports reach it.
    if path and not hasattr(config, "workerinput"):
        config.pluginmanager.register(Progress(path), "gpu_check_progress")
