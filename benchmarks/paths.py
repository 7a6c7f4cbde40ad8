"""Where the benchmarks live and write: the repository root, the records and the run log."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
# The front door appends one line per suite and per run here, in the record directory.
MANIFEST = "runs.jsonl"
