"""Observation and action spaces: Discrete (int32) and Box (float32, or bool for grids of cells)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim import rng


class Discrete:
    """Integers {0, ..., n - 1}, as int32 scalars."""

    dtype = jnp.int32
    shape: tuple[int, ...] = ()

    def __init__(self, n: int):
        if int(n) != n or n < 1:
            raise ValueError(f"Discrete: n must be a positive integer, got {n!r}")
        self.n = int(n)

    def sample(self, key: jax.Array) -> jax.Array:
        return jax.random.randint(key, (), 0, self.n, dtype=jnp.int32)

    def from_bits(self, b: jax.Array) -> jax.Array:
        """Counter-based sample: uint32 bits[...] -> action[...] (used in-kernel)."""
        return rng.to_randint(b, self.n)

    def contains(self, x) -> jax.Array:
        x = jnp.asarray(x)
        if x.shape != () or not jnp.issubdtype(x.dtype, jnp.integer):
            return jnp.bool_(False)
        return (x >= 0) & (x < self.n)

    def __repr__(self):
        return f"Discrete({self.n})"

    def __eq__(self, other):
        return isinstance(other, Discrete) and other.n == self.n

    def __hash__(self):
        return hash((Discrete, self.n))


class Box:
    """Arrays of a fixed shape with elementwise bounds: float32 (bounds possibly infinite), or
    bool with bounds 0 and 1 (a grid of cells, as Gymnasium's `Box(0, 1, shape, bool)`: the
    MinAtar games' observation)."""

    DTYPES = (jnp.float32, jnp.bool_)

    def __init__(self, low, high, shape: tuple[int, ...] | None = None, dtype=jnp.float32):
        known = next((d for d in self.DTYPES if np.dtype(d) == _dtype_or_none(dtype)), None)
        if known is None:
            raise ValueError(f"Box: dtype must be float32 or bool, got {dtype_name(dtype)}")
        dtype = known
        if shape is None:
            shape = np.shape(low) if np.ndim(low) else np.shape(high)
        shape = tuple(int(s) for s in shape)
        low = np.broadcast_to(np.asarray(low, np.float32), shape)
        high = np.broadcast_to(np.asarray(high, np.float32), shape)
        if np.any(low > high):
            raise ValueError(f"Box: low must be <= high elementwise, got low={low}, high={high}")
        if dtype == jnp.bool_ and not (np.isin(low, (0, 1)).all() and np.isin(high, (0, 1)).all()):
            raise ValueError(f"Box: a bool Box has bounds 0 or 1, got low={low}, high={high}")
        self.shape = shape
        self.dtype = dtype
        # Stored as tuples so that spaces (and policies holding them) hash by value: a jitted
        # rollout is cached on them.
        self._low = tuple(low.ravel().tolist())
        self._high = tuple(high.ravel().tolist())

    @property
    def low(self) -> np.ndarray:
        return np.asarray(self._low, np.float32).reshape(self.shape).astype(self.dtype)

    @property
    def high(self) -> np.ndarray:
        return np.asarray(self._high, np.float32).reshape(self.shape).astype(self.dtype)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def sample(self, key: jax.Array) -> jax.Array:
        """Uniform where both bounds are finite, else a (shifted) normal, as Gymnasium does
        (bool: each cell a fair coin where its bounds differ)."""
        k1, k2 = jax.random.split(key)
        return self._transform(
            jax.random.uniform(k1, self.shape), jax.random.normal(k2, self.shape)
        )

    def from_bits(self, b_uniform: jax.Array, b_normal: jax.Array) -> jax.Array:
        """Counter-based sample from uint32 bits[..., *shape] (two independent draws)."""
        return self._transform(rng.to_uniform(b_uniform), rng.to_normal(b_uniform, b_normal))

    def _transform(self, u, z):
        if self.dtype == jnp.bool_:
            low, high = self.low, self.high
            return jnp.where(low == high, low, u < 0.5)
        low, high = self.low, self.high
        lo_fin, hi_fin = np.isfinite(low), np.isfinite(high)
        lo = np.where(lo_fin, low, 0.0).astype(np.float32)
        hi = np.where(hi_fin, high, 0.0).astype(np.float32)
        with np.errstate(over="ignore"):
            span = hi - lo  # inf where the bounds are wider than float32 holds (+-float32 max)
        wide = ~np.isfinite(span)
        bounded = lo + u * np.where(wide, 0.0, span).astype(np.float32)
        if wide.any():  # the convex combination of the bounds stays finite
            bounded = jnp.where(wide, lo * (1 - u) + hi * u, bounded)
        from_low = lo + jnp.abs(z)
        from_high = hi - jnp.abs(z)
        out = jnp.where(
            lo_fin & hi_fin, bounded, jnp.where(lo_fin, from_low, jnp.where(hi_fin, from_high, z))
        )
        return out.astype(jnp.float32)

    def contains(self, x) -> jax.Array:
        """True where `x` has the shape, the dtype's kind (floating; bool for a bool Box) and
        lies within the bounds."""
        x = jnp.asarray(x)
        kind_ok = (
            x.dtype == jnp.bool_
            if self.dtype == jnp.bool_
            else jnp.issubdtype(x.dtype, jnp.floating)
        )
        if x.shape != self.shape or not kind_ok:
            return jnp.bool_(False)
        if self.dtype == jnp.bool_:
            x = x.astype(jnp.float32)
        return jnp.all((x >= self._bounds(self._low)) & (x <= self._bounds(self._high)))

    def _bounds(self, flat) -> np.ndarray:
        return np.asarray(flat, np.float32).reshape(self.shape)

    def __repr__(self):
        def bound(x):
            # Large boxes (image observations) print their range, not every element.
            if x.size <= 16 or x.min() != x.max():
                return x.tolist() if x.size <= 16 else f"[{x.min()}..{x.max()}]"
            return float(x.min())

        low, high = self._bounds(self._low), self._bounds(self._high)
        dtype = "" if self.dtype == jnp.float32 else f", dtype={np.dtype(self.dtype).name}"
        return f"Box(low={bound(low)}, high={bound(high)}, shape={self.shape}{dtype})"

    def __eq__(self, other):
        return isinstance(other, Box) and (
            other.shape,
            np.dtype(other.dtype),
            other._low,
            other._high,
        ) == (self.shape, np.dtype(self.dtype), self._low, self._high)

    def __hash__(self):
        return hash((Box, self.shape, np.dtype(self.dtype).name, self._low, self._high))


Space = Discrete | Box


def _dtype_or_none(dtype):
    try:
        return np.dtype(dtype)
    except TypeError:
        return None


def dtype_name(dtype) -> str:
    d = _dtype_or_none(dtype)
    return repr(dtype) if d is None else d.name
