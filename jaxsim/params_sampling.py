"""Domain randomisation: params samplers, drawn per environment or per episode, and their check.

A params sampler draws chosen params fields with counter-based randomness (`jaxsim.rng`), so
every backend draws the same values; `uniform_params` makes the built-in one from the fields'
declarations (`jaxsim.params`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxsim import rng
from jaxsim.params import is_concrete, specs

__all__ = ["UniformParams", "check_sampler", "uniform_params"]


def check_sampler(owner: str, env, sampler, num_envs: int) -> None:
    """A params sampler must draw known fields at their declared shapes, one per environment.

    `owner` (e.g. "rollout") starts every error message; the checks trace `sampler.draw` once.
    """
    if sampler is None:
        return
    fields = getattr(sampler, "fields", None)
    if not callable(getattr(sampler, "draw", None)) or not isinstance(fields, tuple):
        raise TypeError(
            f"{owner}: params_sampler must have `fields` (a tuple of names) and an elementwise "
            "`draw(seed, index, counter)`, e.g. jaxsim.uniform_params(env, gravity=(9.0, 10.5)); "
            f"got {type(sampler).__name__}"
        )
    shapes = env.param_shapes()
    unknown = sorted(set(fields) - set(shapes))
    if unknown:
        raise ValueError(
            f"{owner}: params_sampler draws {unknown}, which are not params of {env.id}; "
            f"its params are {sorted(shapes)}"
        )
    if isinstance(sampler, UniformParams):  # its bounds may have been replaced since made
        field_specs = {s.name: s for s in specs(env.params_type)}
        for name in fields:
            low, high = sampler.low[name], sampler.high[name]
            if is_concrete((low, high)):
                for bound in (low, high):
                    field_specs[name].check(f"{owner}: params_sampler", bound, np.shape(bound))
                if np.any(np.asarray(low) > np.asarray(high)):
                    raise ValueError(f"{owner}: params_sampler {name} needs low <= high")
    u32 = jax.ShapeDtypeStruct((), jnp.uint32)
    index = jax.ShapeDtypeStruct((num_envs,), jnp.uint32)
    drawn = jax.eval_shape(sampler.draw, (u32, u32), index, u32)
    if sorted(drawn) != sorted(fields):
        raise ValueError(
            f"{owner}: params_sampler.draw returned {sorted(drawn)}, but its fields are {fields}"
        )
    for name, value in drawn.items():
        expected = (num_envs, *shapes[name])
        if value.shape != expected:
            raise ValueError(
                f"{owner}: params_sampler draws {name!r} of shape {value.shape} for {num_envs} "
                f"environments; it needs {expected} (its declared shape {shapes[name]} per "
                "environment)"
            )


_PARAMS_STREAM = 0x4000_0000  # rng streams for drawn params: base + (field << 16) + component


@struct.dataclass
class UniformParams:
    """A params sampler: chosen fields drawn uniformly, per environment or per episode.

    Make it with `jaxsim.uniform_params(env, gravity=(9.0, 10.5), ...)`. Float fields are uniform
    in [low, high); int fields uniform over the integers low ... high inclusive. `low` and `high`
    are arrays (pytree leaves), so new ranges reuse a compiled rollout (a curriculum).

    Draws are counter-based: `draw(seed, index, counter)` is a pure, elementwise function of the
    environment's global index and the step counter, so the scan and fused backends draw the same
    values, and a rollout with `params_sampler=` draws a new episode's values at its auto-reset.
    Any object with `fields` and such a `draw` can serve as a `params_sampler`.
    """

    low: dict[str, jax.Array]
    high: dict[str, jax.Array]
    integer: tuple[str, ...] = struct.field(pytree_node=False, default=())

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(sorted(self.low))

    def draw(self, seed, index, counter) -> dict[str, jax.Array]:
        """Values for environments `index[...]` at `counter`: each field's [..., *shape]."""
        index = jnp.asarray(index, jnp.uint32)
        out = {}
        for j, name in enumerate(self.fields):
            low, high = self.low[name], self.high[name]
            stream = _PARAMS_STREAM + (j << 16)
            if low.ndim:  # one draw per component, components on their own streams
                component = jnp.arange(low.size, dtype=jnp.uint32).reshape(low.shape)
                idx = index.reshape(index.shape + (1,) * low.ndim)
                u = rng.uniform(seed, idx, counter, stream + component)
            else:
                u = rng.uniform(seed, index, counter, stream)
            if name in self.integer:
                span = (high - low + 1).astype(jnp.float32)
                value = low + jnp.minimum(jnp.floor(u * span).astype(jnp.int32), high - low)
            else:
                value = low + u * (high - low)
            out[name] = value
        return out

    def sample(self, key: jax.Array, num_envs: int, params):
        """`params` with the chosen fields drawn once per environment: leaves [num_envs, ...].

        The draw for environment i is `draw(seed(key), i, 0)`.
        """
        drawn = self.draw(rng.seed_from_key(key), jnp.arange(num_envs, dtype=jnp.uint32), 0)
        return params.replace(**drawn)


def uniform_params(env, **ranges) -> UniformParams:
    """A sampler drawing each named params field of `env` uniformly in its (low, high) range.

    Example:
      dr = jaxsim.uniform_params(env, masspole=(0.05, 0.5), length=(0.25, 1.0))
      params = dr.sample(key, 4096, env.default_params)          # one value per environment
      jaxsim.rollout(env, policy, n, num_envs=4096, params=params)
      jaxsim.rollout(env, policy, n, num_envs=4096, params_sampler=dr)  # one per episode

    Each bound is a scalar or an array of the field's declared shape; both bounds must be valid
    values of the field, with low <= high.
    """
    owner = f"uniform_params({env.id})"
    field_specs = {s.name: s for s in specs(env.params_type)}
    if not ranges:
        raise ValueError(f"{owner}: name at least one field, e.g. {next(iter(field_specs))}=(a, b)")
    low, high, integer = {}, {}, []
    for name, bounds in ranges.items():
        if name not in field_specs:
            raise ValueError(
                f"{owner}: unknown params field {name!r}; fields are {sorted(field_specs)}"
            )
        spec = field_specs[name]
        if spec.kind is bool:
            raise TypeError(f"{owner}: {name} is a bool; only int and float fields are drawn")
        if not isinstance(bounds, tuple | list) or len(bounds) != 2:
            raise ValueError(f"{owner}: {name} needs a (low, high) pair, got {bounds!r}")
        shape = spec.resolve_shape(env.config)
        lo, hi = (np.asarray(spec.check(owner, b, shape)) for b in bounds)
        lo, hi = np.broadcast_to(lo, shape), np.broadcast_to(hi, shape)
        if np.any(lo > hi):
            raise ValueError(f"{owner}: {name} needs low <= high, got ({bounds[0]}, {bounds[1]})")
        dtype = jnp.int32 if spec.kind is int else jnp.float32
        low[name], high[name] = jnp.asarray(lo, dtype), jnp.asarray(hi, dtype)
        if spec.kind is int:
            integer.append(name)
    return UniformParams(low, high, tuple(sorted(integer)))
