"""Config dataclass fields that carry their own help: `config_field(default, help)`.

The help is the field's documentation in the source and its flag's text in `agents.train`.
"""

from __future__ import annotations

import dataclasses
from typing import Any


def config_field(default: Any, help: str) -> Any:
    """A dataclass field with `default` and `help` (kept in the field's metadata)."""
    return dataclasses.field(default=default, metadata={"help": help})


def field_help(field: dataclasses.Field) -> str:
    """The help of a field made by `config_field`; a TypeError naming the field otherwise."""
    if "help" not in field.metadata:
        raise TypeError(f"config field {field.name!r} has no help: declare it with config_field")
    return field.metadata["help"]
