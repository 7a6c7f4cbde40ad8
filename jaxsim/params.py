"""Declared fields of params and static config: types, ranges, shapes, and per-environment axes.

An environment has two kinds of settings. **Params** are a pytree of values that may change
between rollouts, and between the environments of one rollout, without recompiling (gravity, a
mass, `max_episode_steps`). **Static config** fixes array shapes (a number of particles, an
observation layout); it is part of the environment's identity and so of the compile-cache key.

Both are frozen dataclasses whose fields are declared with `field`, which records a field's kind
(int, float or bool, from its default), its valid range and, for params, its shape: a scalar
unless declared otherwise, the shape possibly naming static-config fields (`shape=("n",)`).
The declared shape is what makes a per-environment value unambiguous: a leaf of the declared
shape is shared by every environment, one with a leading `num_envs` axis is one value each.
Params drawn per environment or per episode (domain randomisation) are `jaxsim.params_sampling`.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any

import jax
import numpy as np

_META = "jaxsim"


def field(
    default,
    *,
    shape: tuple[int | str, ...] = (),
    ge=None,
    gt=None,
    le=None,
    lt=None,
    power_of_two: bool = False,
    choices: tuple = (),
    doc: str = "",
):
    """A declared field of a params or static-config dataclass.

    Args:
      default: the default value; its Python type (int, float or bool) is the field's kind. An
        array-valued field gives a scalar default, broadcast to its shape.
      shape: the shape of one environment's value, () for a scalar. Entries may name fields of
        the environment's static config, e.g. `("num_particles",)`.
      ge, gt, le, lt: inclusive/exclusive bounds a value must respect.
      power_of_two: the value must be a power of two (static sizes a GPU kernel tiles).
      choices: the values a string field of static config may take (e.g. a physics backend).
      doc: one line on what the field means, shown in error messages.
    """
    spec = dict(shape=tuple(shape), ge=ge, gt=gt, le=le, lt=lt, power_of_two=power_of_two, doc=doc)
    if choices:
        spec["choices"] = tuple(choices)
    return dataclasses.field(default=default, metadata={"pytree_node": True, _META: spec})


@dataclasses.dataclass(frozen=True)
class Spec:
    """What a field declares: its kind, the shape of one environment's value, its range."""

    name: str
    kind: type  # int, float, bool, or str (static config with `choices`)
    default: Any
    shape: tuple[int | str, ...] = ()
    ge: Any = None
    gt: Any = None
    le: Any = None
    lt: Any = None
    power_of_two: bool = False
    doc: str = ""
    choices: tuple = ()

    def resolve_shape(self, config) -> tuple[int, ...]:
        """The declared shape with static-config names replaced by their values."""
        return resolve_shape(self.shape, config)

    def describe(self) -> str:
        """The expected value in words, e.g. 'a float > 0' or 'an int in [1, 2**31)'."""
        if self.kind is str:
            return f"one of {list(self.choices)}"
        noun = {int: "an integer", float: "a float", bool: "a bool"}[self.kind]
        bounds = [f">= {self.ge}" if self.ge is not None else None]
        bounds += [f"> {self.gt}" if self.gt is not None else None]
        bounds += [f"<= {self.le}" if self.le is not None else None]
        bounds += [f"< {self.lt}" if self.lt is not None else None]
        text = " and ".join(b for b in bounds if b)
        if self.power_of_two:
            noun = f"{noun} power of two"
        return f"{noun} {text}".strip() if text else noun

    def check(self, owner: str, value, shape: tuple[int, ...] = (), per_env: bool = False):
        """`value` converted to the field's kind, or a ValueError/TypeError naming the field.

        A value is a Python or numpy scalar, or (for an array-valued field) anything of the
        declared shape or broadcastable to it: every element is checked. Values are checked as
        the dtype they will have on the device (float32, int32): a float that overflows to inf
        or underflows to 0 there is judged as inf or 0. With `per_env`, the leading axis of
        `shape` is the environments', and an error names the environment.
        """
        where = f"{owner}: {self.name}"
        expected = self.describe()
        if shape:
            arr = np.asarray(value)
            if arr.dtype.kind not in "biuf" or (arr.dtype.kind == "b") != (self.kind is bool):
                raise TypeError(f"{where} must hold {expected} values, got {value!r}")
            try:
                arr = np.broadcast_to(arr, shape)
            except ValueError:
                raise ValueError(
                    f"{where} must have shape {shape} (or broadcast to it), got shape {arr.shape}"
                ) from None
            # Every element meets the same checks as a scalar; the first that fails is named.
            bad = np.zeros(arr.shape, bool)
            if self.kind is int:
                bad |= arr.dtype.kind not in "iu"
                if arr.dtype.kind in "iu":
                    bad |= (arr < _INT32.min) | (arr > _INT32.max)
            device = _as_device_dtype(arr, self.kind)
            if device.dtype.kind == "f":
                bad |= ~np.isfinite(device)
            for op, bound in ((np.less, self.ge), (np.less_equal, self.gt)):
                if bound is not None:
                    bad |= op(device, bound)
            for op, bound in ((np.greater, self.le), (np.greater_equal, self.lt)):
                if bound is not None:
                    bad |= op(device, bound)
            if bad.any():
                index = tuple(int(i) for i in np.argwhere(bad)[0])
                if per_env:
                    where = f"{where} of environment {index[0]}"
                    index = index[1:]
                if index:
                    where = f"{where}{list(index)}"
                self._check_scalar(where, expected, arr[bad].ravel()[0].item())
            return np.array(device)
        if isinstance(value, np.ndarray | jax.Array) and np.ndim(value) == 0:
            value = value.item()
        return self._check_scalar(where, expected, value)

    def _check_scalar(self, where, expected, value):
        if self.kind is str:
            if value not in self.choices:
                raise ValueError(f"{where} must be {expected}, got {value!r}")
            return value
        ok_type = {
            bool: isinstance(value, bool | np.bool_),
            int: isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_),
            float: isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_),
        }[self.kind]
        if not ok_type:
            raise TypeError(f"{where} must be {expected}, got {value!r} ({type(value).__name__})")
        value = self.kind(value)
        if self.kind is float and not math.isfinite(value):
            raise ValueError(f"{where} must be a finite {expected[2:]}, got {value!r}")
        if self.kind is int and not _INT32.min <= value <= _INT32.max:
            raise ValueError(f"{where} must be {expected} that fits int32, got {value!r}")
        # Judged as the device will hold it: 1e39 is inf in float32, 1e-50 is 0.
        device = _as_device_dtype(np.asarray(value), self.kind).item()
        if self.kind is float and not math.isfinite(device):
            raise ValueError(
                f"{where} must be a finite {expected[2:]} in float32, got {value!r} "
                f"(float32 {device})"
            )
        bad = (
            (self.ge is not None and not device >= self.ge)
            or (self.gt is not None and not device > self.gt)
            or (self.le is not None and not device <= self.le)
            or (self.lt is not None and not device < self.lt)
            or (self.power_of_two and (value < 1 or value & (value - 1)))
        )
        if bad:
            doc = f" ({self.doc})" if self.doc else ""
            shown = f" (float32 {device!r})" if self.kind is float and device != value else ""
            raise ValueError(f"{where}{doc} must be {expected}, got {value!r}{shown}")
        return value


_INT32 = np.iinfo(np.int32)
_DEVICE_DTYPE = {int: np.int32, float: np.float32, bool: np.bool_}


def _as_device_dtype(arr: np.ndarray, kind: type) -> np.ndarray:
    """`arr` as the dtype a field of `kind` has on the device (overflow becomes inf, silently:
    the caller refuses it); ints outside int32 are the caller's to refuse before this."""
    if kind is int:
        arr = np.clip(arr, _INT32.min, _INT32.max) if arr.dtype.kind in "iu" else arr
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return arr.astype(_DEVICE_DTYPE[kind])


def resolve_shape(shape: tuple[int | str, ...], config) -> tuple[int, ...]:
    """A declared shape with the static-config field names in it replaced by their values."""
    return tuple(getattr(config, d) if isinstance(d, str) else d for d in shape)


def specs(cls) -> tuple[Spec, ...]:
    """The declared fields of a params or static-config dataclass, in field order.

    A field not made with `field` is a scalar of its default's kind with no range.
    """
    out = []
    for f in dataclasses.fields(cls):
        meta = dict(f.metadata.get(_META, {}))
        default = f.default
        if default is dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: every params/config field needs a default")
        kind = bool if isinstance(default, bool) else int if isinstance(default, int) else float
        if isinstance(default, str):
            if not meta.get("choices"):
                raise TypeError(f"{cls.__name__}.{f.name}: a string field needs its choices")
            kind = str
        out.append(Spec(f.name, kind, default, **meta))
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class NoConfig:
    """The static config of an environment whose shapes are fixed (the classic-control five)."""


# ---------------------------------------------------------------------------- per-environment axes
def batch_axes(owner: str, spec_list, shapes, params, num_envs: int):
    """Which leaves of `params` are per-environment: a pytree like `params` of 0 or None.

    Args:
      owner: who is asking, for error messages (e.g. "rollout: params of CartPole-v1").
      spec_list: `specs(type(params))`.
      shapes: the declared shape of each field, resolved against the static config.
      params: a params instance; its leaves may be concrete or traced.
      num_envs: the batch size.

    A leaf of its field's declared shape S is shared (None); one of shape (num_envs, *S) is per
    environment (0). Anything else is a ValueError naming the field, before any work is done.
    """
    axes = {}
    for spec, shape in zip(spec_list, shapes, strict=True):
        value = getattr(params, spec.name)
        got = tuple(np.shape(value))
        if got == shape:
            axes[spec.name] = None
        elif got == (num_envs, *shape):
            axes[spec.name] = 0
        else:
            raise ValueError(
                f"{owner}: field {spec.name!r} has shape {got}; it needs its declared shape "
                f"{shape} (shared by every environment) or ({num_envs}, *{shape}) = "
                f"{(num_envs, *shape)} (one value per environment, num_envs={num_envs})"
            )
        if is_concrete(value):  # traced values are checked in checked mode (jaxsim.rollout.checks)
            spec.check(owner, value, got, per_env=axes[spec.name] == 0)
    return params.replace(**axes)


def is_concrete(value) -> bool:
    """True if every leaf of `value` can be read on this host (not traced, not split over hosts)."""
    for leaf in jax.tree.leaves(value):
        if isinstance(leaf, jax.core.Tracer):
            return False
        if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
            return False
    return True


def as_arrays(params):
    """`params` with every field given as a Python list or tuple made one numpy array.

    A list is a pytree of many leaves to jax; the field is one array (the declared shape, or
    one value per environment), which is what the backends index and trace.
    """
    lists = {}
    for f in dataclasses.fields(params):
        value = getattr(params, f.name)
        if isinstance(value, list | tuple):
            try:
                lists[f.name] = np.asarray(value)
            except ValueError as err:
                raise ValueError(
                    f"params: field {f.name!r} is not a rectangular array: {err}"
                ) from None
    return params.replace(**lists) if lists else params
