"""What a suite is (its declaration in its folder's suite.py) and what it is asked to do."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a suite is asked to do: the mode, the selected baselines and the device."""

    mode: str
    baselines: frozenset[str]
    on_gpu: bool


@dataclasses.dataclass(frozen=True)
class Suite:
    """One suite, declared in its folder's suite.py."""

    name: str  # `python -m benchmarks run --suite NAME`
    module: str  # `python -m <module> <args> --out <record>` measures: benchmarks.<suite>.measure
    title: str  # one line: what it measures
    heading: str  # its section's heading in RESULTS.md
    # A record's problems beyond `benchmark` and `provenance`, each naming its field.
    problems: Callable[[dict[str, Any]], list[str]]
    # (record, RESULTS.md's folder, its plot or None) -> the Markdown of its section.
    section: Callable[[Any, Path, Path | None], str]
    # The command-line arguments per plan; None: not run by the front door, only on its own.
    args: Callable[[Plan], list[str]] | None = None
    plot: Callable[[Any, Path], Path | None] | None = None  # (record, png path) -> png
    # (record data) -> what it measured that another record of the suite may not have (a sweep,
    # one size at length): the report shows the newest record of each scope. None: one scope.
    scope: Callable[[dict[str, Any]], str] | None = None
    no_record: str = ""  # said under the heading when there is no record
    missing_reason: str = ""  # why the module may be missing

    @property
    def benchmark(self) -> str:
        """The record's "benchmark" field and its file name's stem: the suite folder's name
        (`benchmarks.fusion.measure` -> fusion; a module run as a package -> its name)."""
        package, _, leaf = self.module.rpartition(".")
        return package.rpartition(".")[2] if leaf == "measure" else leaf
