"""A suite package's public names, found in its measure module on first use: the registry reads
every package's suite.py, and that must not import jax, agents or a baseline's library."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def from_measure(package: str) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` that looks public names up in `package.measure`."""

    def __getattr__(name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.measure"), name)

    return __getattr__
