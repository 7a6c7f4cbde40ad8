"""A suite package's public names, found in its measure module on first use: the registry reads
every package's suite.py, and that must not import jax, agents or a baseline's library."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import Any


def from_measure(package: str) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: a submodule's name gives the submodule (so
    `package.measure` is the module, not its function of that name), any other public name is
    looked up in `package.measure`."""

    def __getattr__(name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if importlib.util.find_spec(f"{package}.{name}") is not None:
            return importlib.import_module(f"{package}.{name}")
        return getattr(importlib.import_module(f"{package}.measure"), name)

    return __getattr__
