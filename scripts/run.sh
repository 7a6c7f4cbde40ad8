#!/usr/bin/env bash
# The main job on a fresh machine: set up, then every benchmark suite in quick mode (a few
# minutes on 2 CPU cores). Records, RESULTS.md and plots go to runs/bench/<run id>/ (ignored by
# git): the run prints the summary table and the report's path and changes no tracked file.
# Publishing the figures is a separate act: `python -m benchmarks report --publish --results DIR`.
# Extra arguments go to `python -m benchmarks run`, e.g. `bash scripts/run.sh --suite throughput`
# or `bash scripts/run.sh --full`. Optional baselines (EnvPool, PyTorch, Stable-Baselines3) are
# measured where installed, else reported as skipped with the command that installs them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh bench
# Quick is the default mode (`--full` or `--smoke` among the arguments replaces it).
exec .venv/bin/python -m benchmarks run "$@"
