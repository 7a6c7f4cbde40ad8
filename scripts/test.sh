#!/usr/bin/env bash
# Set up, lint, and run the test suite (CPU; GPU-marked tests skip without a GPU).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh test
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# Two workers, a test file each at a time: the CI machine's two cores (PYTEST_WORKERS=0: one process).
exec .venv/bin/python -m pytest -n "${PYTEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "$@"
