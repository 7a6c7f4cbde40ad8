#!/usr/bin/env bash
# The main job on a fresh machine: set up, then every benchmark suite in quick mode (a few
# minutes on 2 CPU cores) and the report built from the records it wrote.
# Extra arguments go to `python -m benchmarks run`, e.g. `bash scripts/run.sh --suite throughput`
# or `bash scripts/run.sh --full`. Optional baselines (EnvPool, PyTorch, Stable-Baselines3) are
# measured where installed (`pip install -e ".[baselines]"`), else reported as skipped.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh bench
# Quick is the default mode (`--full` or `--smoke` among the arguments replaces it); --report
# rebuilds RESULTS.md, the plots and the README's results from the records, failures included.
exec .venv/bin/python -m benchmarks run --report "$@"
