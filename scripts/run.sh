#!/usr/bin/env bash
# The main job on a fresh machine: set up, then compare jaxsim with the CPU baselines (quick).
# Extra arguments go to the benchmark, e.g. `bash scripts/run.sh --num-envs 1,4096`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh bench
exec .venv/bin/python -m benchmarks.rollout_throughput --quick "$@"
