"""What every agent's config shares: fields that carry their own help, dict round trips, checks.

`config_field(default, help)` declares a field whose help is its documentation in the source and
its flag's text in `agents.train`; `ConfigMixin` gives a frozen config dataclass `to_dict`,
`from_dict` and `fail`; the `check_*` helpers are the validations several configs run.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NoReturn


def config_field(default: Any, help: str) -> Any:
    """A dataclass field with `default` and `help` (kept in the field's metadata)."""
    return dataclasses.field(default=default, metadata={"help": help})


def field_help(field: dataclasses.Field) -> str:
    """The help of a field made by `config_field`; a TypeError naming the field otherwise."""
    if "help" not in field.metadata:
        raise TypeError(f"config field {field.name!r} has no help: declare it with config_field")
    return field.metadata["help"]


class ConfigMixin:
    """JSON round trips (tuples become lists and back) and errors named after the config class."""

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]):
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - set(fields))
        if unknown:
            raise ValueError(f"{cls.__name__}: unknown field(s) {unknown}")
        d = {k: tuple(v) if isinstance(fields[k].default, tuple) else v for k, v in d.items()}
        return cls(**d)

    def fail(self, msg: str) -> NoReturn:
        raise ValueError(f"{type(self).__name__}: {msg}")


def check_positive_ints(config: ConfigMixin, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            config.fail(f"{name} must be a positive integer, got {value!r}")


def check_positive(config: ConfigMixin, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(config, name)
        if not (value > 0 and math.isfinite(value)):
            config.fail(f"{name} must be > 0, got {value!r}")


def check_common(config: ConfigMixin, steps_per_update: int) -> None:
    """Checks every agent's config runs: sizes, gamma, hidden widths, the rollout backend."""
    check_positive_ints(config, ("total_steps", "num_envs", "num_steps", "eval_envs", "log_every"))
    if config.total_steps < steps_per_update:
        config.fail(
            f"total_steps={config.total_steps} is less than one batch ({steps_per_update} steps)"
        )
    check_positive(config, ("learning_rate",))
    if not 0 < config.gamma <= 1:
        config.fail(f"gamma must be in (0, 1], got {config.gamma!r}")
    hidden = config.hidden
    if (
        not isinstance(hidden, tuple)
        or not hidden
        or not all(isinstance(h, int) and not isinstance(h, bool) and h > 0 for h in hidden)
    ):
        config.fail(f"hidden must be a non-empty tuple of positive integers, got {hidden!r}")
    if not isinstance(config.rollout_backend, str):
        config.fail(f"rollout_backend must be a string, got {config.rollout_backend!r}")
