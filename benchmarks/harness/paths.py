"""Where the benchmarks live and write: the repository root, the records and the run log.

Measuring is not publishing: every run writes under RUNS_DIR (ignored by git), and only
`python -m benchmarks report --publish` copies records into RESULTS_DIR (the committed ones)
and rewrites benchmarks/RESULTS.md and the README's results section.
"""

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# The published records, RESULTS.md's sources: changed only by `report --publish`.
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
# Under RESULTS_DIR: published records that `report --publish --replace` replaced, kept as
# history (`<record stem>_<its UTC time>_<its commit>.json`); the report does not read them.
HISTORY = "history"
# Where runs write: one folder per front-door run; a suite run on its own writes here directly.
RUNS_DIR = REPO_ROOT / "runs" / "bench"
# The front door appends one line per suite and per run here, in the record directory.
MANIFEST = "runs.jsonl"


def inside(path: Path, parent: Path) -> bool:
    """Whether `path` is `parent` or below it, both resolved."""
    path, parent = Path(path).resolve(), Path(parent).resolve()
    return path == parent or parent in path.parents


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a child `python` run from the repository: `benchmarks`
    and `agents` importable from this checkout, installed or not, output unbuffered."""
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path, **extra}
