"""Optional modules (the baselines' libraries): importing one, or saying how to install it; a
case that cannot run, recorded as skipped or failed."""

from __future__ import annotations

import importlib
import traceback
from typing import Any

# The exact command that installs each optional module (from the repository root). torch comes
# first as the CPU build: otherwise pip resolves it to the default build, which bundles CUDA.
_CPU_TORCH = (
    "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu && "
    'pip install -e ".[baselines]"'
)
INSTALL = {
    "gymnasium": 'pip install -e ".[bench]"',
    "gymnax": 'pip install -e ".[bench]"',
    "brax": 'pip install -e ".[brax]"',
    "envpool": _CPU_TORCH,
    "torch": _CPU_TORCH,
    "stable-baselines3": _CPU_TORCH,
    "stable_baselines3": _CPU_TORCH,
}


def install_hint(module: str) -> str:
    """'install with: <command>' for an optional module (or its distribution), else ''."""
    command = INSTALL.get(module.split(".")[0])
    return f"install with: {command}" if command else ""


class Skipped(Exception):
    """A baseline that cannot run here (package missing, environment not provided, size)."""


def require(module: str):
    """Imports `module`, or raises Skipped naming it and the command that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        hint = install_hint(module)
        raise Skipped(f"{module} is not importable: {e}" + (f"; {hint}" if hint else "")) from None


def not_measured(
    point: dict[str, Any], error: Exception, missing=Skipped, failed_key: str = "reason"
) -> dict[str, Any]:
    """`point` for a case that did not run: "skipped" with the `reason` where `error` is one of
    `missing` (a library or environment this machine lacks), else "failed" with `failed_key`
    naming the error (its traceback printed). The suite records it and goes on."""
    if isinstance(error, missing):
        return {**point, "status": "skipped", "reason": str(error)}
    traceback.print_exception(error)
    return {**point, "status": "failed", failed_key: f"{type(error).__name__}: {error}"}
