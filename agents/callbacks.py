"""Device-to-host reporting from inside a jitted, vmapped loop, at the least cost per report.

Each host callback is a round trip whose cost grows with its argument count and, under vmap,
`jax.debug.callback` is unrolled into one round trip per batch element. `report_when` packs a
pytree of scalars into one float32 vector and, through `custom_vmap`, makes a single call that
carries every batch element; the host function still sees one pytree per element.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import custom_batching


def _host_call(fn: Callable[[np.ndarray], None], x: jax.Array) -> None:
    """`jax.debug.callback(fn, x)`; under vmap one call with the batch on x's leading axes."""

    @custom_batching.custom_vmap
    def call(x):
        jax.debug.callback(fn, x)
        return jnp.zeros((), jnp.int32)

    @call.def_vmap
    def _(axis_size, in_batched, x):
        jax.debug.callback(fn, x)
        return jnp.zeros((), jnp.int32), False

    call(x)


def _unpack(fn: Callable[[Any], None], treedef, packed: np.ndarray) -> None:
    packed = np.asarray(packed)
    for row in packed.reshape(-1, packed.shape[-1]):  # one row per batch element
        fn(jax.tree.unflatten(treedef, [np.float32(x) for x in row]))


def report_when(pred: jax.Array, fn: Callable[[Any], None], tree: Any) -> None:
    """Calls `fn(tree)` on the host where `pred` holds (once per element under vmap).

    Args:
      pred: a scalar bool. Keep it unbatched under vmap (derive it from a loop index, not from
        a vmapped value): a batched predicate turns the branch into a select that always calls.
      fn: host function; receives `tree` with numpy float32 scalars as leaves (integers are
        exact below 2**24).
      tree: a pytree of scalars.
    """
    leaves, treedef = jax.tree.flatten(tree)
    packed = jnp.stack([jnp.asarray(x, jnp.float32) for x in leaves])
    host = functools.partial(_unpack, fn, treedef)
    jax.lax.cond(pred, lambda p: _host_call(host, p), lambda p: None, packed)
