"""What every agent's config shares: declared fields with help and range, the common base, checks.

`config_field(default, help, ge=..., gt=..., le=..., lt=..., choices=...)` declares a field: its
help is its documentation in the source and its flag's text in `agents.train`; its range is a
`jaxsim.params` declaration, checked by `check_declared` with the message `jaxsim.params.Spec`
gives (the field, what was given, what is accepted). `AgentConfig` declares the fields every
agent has once; a subclass changes a default (or a help) with `override`, keeping the range.
`check_value` checks one argument that is not a config field against a declaration made on the
spot, with the same messages.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NoReturn

from jaxsim import params as jparams

_SPEC = "jaxsim"  # where jaxsim.params.field keeps a declaration in a field's metadata


def config_field(default: Any, help: str, *, optional: bool = False, **declared) -> Any:
    """A dataclass field with `default`, `help` and, in `declared`, a `jaxsim.params.field`
    declaration (ge, gt, le, lt, power_of_two, choices) that `check_declared` enforces.

    The field's kind (int, float, str) is its default's; `optional` lets it be None too (no
    default value to take the kind from: the kind is int).
    """
    meta: dict[str, Any] = {"help": help}
    if declared or optional:
        spec = dict(jparams.field(default, **declared).metadata[_SPEC])
        spec["optional"] = optional
        meta[_SPEC] = spec
    return dataclasses.field(default=default, metadata=meta)


def override(base: type, name: str, default: Any, help: str | None = None) -> Any:
    """`base`'s field `name` redeclared in a subclass with another default (and help): its
    declared range stays the one `base` gives."""
    fields = {f.name: f for f in dataclasses.fields(base)}
    if name not in fields:
        raise TypeError(f"override: {base.__name__} has no field {name!r}; it has {list(fields)}")
    meta = dict(fields[name].metadata)
    if help is not None:
        meta["help"] = help
    return dataclasses.field(default=default, metadata=meta)


def field_help(field: dataclasses.Field) -> str:
    """The help of a field made by `config_field`; a TypeError naming the field otherwise."""
    if "help" not in field.metadata:
        raise TypeError(f"config field {field.name!r} has no help: declare it with config_field")
    return field.metadata["help"]


def declared_specs(cls: type) -> dict[str, jparams.Spec]:
    """The `jaxsim.params.Spec` of every field of `cls` declared with a range or choices."""
    out = {}
    for f in dataclasses.fields(cls):
        spec = dict(f.metadata.get(_SPEC, ()))
        if not spec:
            continue
        spec.pop("optional")
        default = f.default
        kind = str if spec.get("choices") else int if isinstance(default, int | None) else float
        out[f.name] = jparams.Spec(f.name, kind, default, **spec)
    return out


def _checked(spec: jparams.Spec, owner: str, value: Any) -> Any:
    try:
        return spec.check(owner, value)
    except TypeError as e:  # a value of the wrong kind is bad input, as an out-of-range one
        raise ValueError(str(e)) from None


def check_declared(config: Any) -> None:
    """A ValueError naming the first field of `config` outside its declaration (see
    `config_field`), what was given and what is accepted.

    A checked value is stored as its field's kind (a numpy scalar becomes a Python number), so
    the config's JSON and its hash do not depend on how the value was given.
    """
    owner = type(config).__name__
    specs = declared_specs(type(config))
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name in specs and not (f.metadata[_SPEC]["optional"] and value is None):
            object.__setattr__(config, f.name, _checked(specs[f.name], owner, value))


def check_value(owner: str, name: str, value: Any, kind: type = int, **declared) -> None:
    """A ValueError "owner: name must be <what is accepted>, got <value>" unless `value` is of
    `kind` within `declared` (ge, gt, le, lt, as `jaxsim.params.field` takes them)."""
    _checked(jparams.Spec(name, kind, None, **declared), owner, value)


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


@dataclasses.dataclass(frozen=True)
class AgentConfig(ConfigMixin):
    """The fields every agent's config has, declared once; each agent adds its own after them.

    `__post_init__` checks the declarations, then the agent's `validate` (what relates fields).
    """

    total_steps: int = config_field(
        50_000, "Environment steps per seed over the run; rounded down to whole updates.", ge=1
    )
    num_envs: int = config_field(4, "Environments stepped in parallel per seed.", ge=1)
    num_steps: int = config_field(
        64, "Steps per environment in each rollout (between updates).", ge=1
    )
    learning_rate: float = config_field(1e-3, "Adam step size.", gt=0)
    gamma: float = config_field(0.99, "Discount factor.", gt=0, le=1)
    hidden: tuple[int, ...] = config_field((64, 64), "Hidden layer widths of every net.")
    eval_envs: int = config_field(
        32, "Environments (one episode each) in the deterministic evaluation.", ge=1
    )
    log_every: int = config_field(
        10, "Updates between progress callbacks (and at the end of each run call).", ge=1
    )
    rollout_backend: str = config_field("scan", "`jaxsim.rollout` backend.")

    def __post_init__(self):
        check_declared(self)
        self.validate()

    @property
    def steps_per_update(self) -> int:
        """Environment steps per update per seed: num_envs * num_steps."""
        return self.num_envs * self.num_steps

    @property
    def num_updates(self) -> int:
        return self.total_steps // self.steps_per_update

    def validate(self) -> None:
        """What relates the common fields (an agent's override calls it first)."""
        if self.total_steps < self.steps_per_update:
            self.fail(
                f"total_steps={self.total_steps} is less than one batch "
                f"({self.steps_per_update} steps)"
            )
        hidden = self.hidden
        if not isinstance(hidden, tuple) or not hidden:
            self.fail(f"hidden must be a non-empty tuple of positive integers, got {hidden!r}")
        for i, width in enumerate(hidden):
            check_value(type(self).__name__, f"hidden[{i}]", width, ge=1)
        if not isinstance(self.rollout_backend, str):
            self.fail(f"rollout_backend must be a string, got {self.rollout_backend!r}")
