"""The suite registry: every suite the front door runs and the report shows, in report order.

A suite is one folder, benchmarks/<benchmark>/ (a namespace package: no `__init__.py`), whose
`suite.py` declares `SUITE` (what it measures, its arguments per mode, its record's schema) and
draws its section of the results report, and whose `measure.py` measures (`python -m
benchmarks.<benchmark>.measure`). Adding a suite is that folder and one line in PACKAGES.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchmarks.harness.suite import Plan, Suite  # noqa: F401 (Plan: for callers)
from benchmarks.report.schema import base_problems

MODES = ("smoke", "quick", "full")
# Seconds a suite may run before it is stopped and recorded as failed.
TIMEOUT_S = {"smoke": 300, "quick": 900, "full": 3 * 3600}

# Baselines: name -> (what it is, the distribution that provides it, the suite that measures it).
BASELINES = {
    "gymnasium_sync": ("Gymnasium SyncVectorEnv", "gymnasium", "throughput, breakdown"),
    "gymnasium_async": ("Gymnasium AsyncVectorEnv", "gymnasium", "throughput"),
    "gymnasium_numpy": ("Gymnasium numpy-vectorized CartPole", "gymnasium", "throughput"),
    "envpool": ("EnvPool", "envpool", "throughput, decoupled"),
    "gymnax": ("gymnax", "gymnax", "throughput, adapters, minatar"),
    "brax": ("brax's own jit(scan(step)) loop, its auto-reset", "brax", "adapters"),
    "torch": ("eager-PyTorch vectorized CartPole", "torch", "throughput"),
    "sb3": ("Stable-Baselines3 PPO", "stable-baselines3", "ppo, decoupled"),
}

# One line per suite: the package that holds it. The order is the report's and the runs'.
PACKAGES = (
    "benchmarks.rollout_throughput",
    "benchmarks.fusion",
    "benchmarks.fusion_sizes",
    "benchmarks.ppo",
    "benchmarks.breakdown",
    "benchmarks.offpolicy",
    "benchmarks.offpolicy_solve",
    "benchmarks.decoupled",
    "benchmarks.adapters",
    "benchmarks.minatar",
    "benchmarks.scaling",
    "benchmarks.peers",
    "benchmarks.front",
)


def load(packages: Iterable[str]) -> dict[str, Suite]:
    """name -> Suite of each package's suite.py, in the order given."""
    suites = [importlib.import_module(f"{p}.suite").SUITE for p in packages]
    return {s.name: s for s in suites}


SUITES: dict[str, Suite] = load(PACKAGES)


def by_benchmark() -> dict[str, Suite]:
    """benchmark -> Suite, in the report's order."""
    return {s.benchmark: s for s in SUITES.values()}


def runnable() -> list[str]:
    """The names of the suites the front door runs."""
    return [s.name for s in SUITES.values() if s.args is not None]


def record_problems(data: dict[str, Any]) -> list[str]:
    """What keeps the report from using `data`, a suite's record: each problem names the field
    (an empty list if none). A rate, time or ratio that is zero, negative or not finite is a
    problem: the report divides by them."""
    suite = by_benchmark().get(data.get("benchmark"))
    return base_problems(data, suite.problems if suite else None)


def section_of(path: Path) -> str:
    """The results report's section of the suite record at `path` (no plot): what its measuring
    module prints when it has written it."""
    from benchmarks.report.records import Record

    data = json.loads(Path(path).read_text())
    return by_benchmark()[data["benchmark"]].section(
        Record(Path(path), data), Path(path).parent, None
    )


def suite_available(suite: Suite) -> str | None:
    """None if the suite's measuring module exists, else why it is skipped."""
    try:
        found = importlib.util.find_spec(suite.module) is not None
    except (ImportError, ValueError):
        found = False
    if found:
        return None
    why = f"{suite.module.replace('.', '/')} does not exist in this checkout"
    return f"{why}: {suite.missing_reason}" if suite.missing_reason else why
