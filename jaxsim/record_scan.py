"""`record_scan`: `lax.scan` for a loop whose per-step outputs are a large trajectory.

`lax.scan` starts every output buffer as zeros; XLA's common-subexpression pass merges the
equal ones (obs with next_obs, reward with episode_return, action with episode_length,
terminated with truncated) into one broadcast per shape and dtype, and copy insertion then
copies that broadcast for each loop buffer. At CartPole, 4096 environments, 1000 steps, every
field recorded (205 MB of outputs), that is 101 MB read and written again before the first
step: about 5% of the call's time on the 2-core CPU. Here every buffer starts from its own fill
value, so each is one write and there is nothing to copy; the loop then overwrites every
element, so the fill values never show.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np

from jaxsim.reuse import check_into


def record_scan(
    body: Callable[[Any, Any], tuple[Any, Any]],
    carry,
    xs,
    *,
    place: Callable[[Any], Any] | None = None,
    into=None,
):
    """What `jax.lax.scan(body, carry, xs)` returns, the per-step outputs written in place.

    Args:
      body: `body(carry, x) -> (carry, y)`; `x` is `xs` at step t, `y` a pytree of arrays.
      carry: the loop carry.
      xs: a pytree whose leaves have leading shape [n] (n >= 1), sliced at t for step t.
      place: applied to the output buffers before the loop (e.g. a sharding constraint), or None.
      into: buffers to write the outputs into (`ys`'s structure, shapes and dtypes, checked
        here, at trace time), e.g. an earlier call's outputs donated to this one; None: fresh.
        A dict may give None for some of its entries: those start fresh.

    Returns:
      (carry after step n - 1, ys): ys has `y`'s structure, leaves [n, *y_leaf.shape].
    """
    lengths = {leaf.shape[0] for leaf in jax.tree.leaves(xs)}
    if len(lengths) != 1:
        raise ValueError(f"record_scan: xs leaves need one leading length, got {sorted(lengths)}")
    (n,) = lengths
    x0 = jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape[1:], leaf.dtype), xs)
    # The buffers' shapes come from the step's outputs: trace the step once, for them and for
    # the loop, so a policy is traced as often as under lax.scan.
    step_jaxpr, (carry_shapes, y_shapes) = jax.make_jaxpr(body, return_shape=True)(carry, x0)
    run_step = jax.extend.core.jaxpr_as_fun(step_jaxpr)
    out_tree = jax.tree.structure((carry_shapes, y_shapes))
    if into is None:
        ys = _distinct_buffers(n, y_shapes)
    elif isinstance(into, dict) and None in into.values():  # some entries start fresh
        given = {k: v for k, v in into.items() if v is not None}
        ys = _distinct_buffers(n, {k: y for k, y in y_shapes.items() if k not in given})
        ys.update(_checked(n, {k: y_shapes[k] for k in given}, given))
    else:
        ys = _checked(n, y_shapes, into)
    if place is not None:
        ys = place(ys)

    def step(t, state):
        carry, ys = state
        x = jax.tree.map(lambda leaf: leaf[t], xs)
        carry, y = jax.tree.unflatten(out_tree, run_step(*jax.tree.leaves((carry, x))))
        ys = jax.tree.map(lambda buf, v: jax.lax.dynamic_update_index_in_dim(buf, v, t, 0), ys, y)
        return carry, ys

    return jax.lax.fori_loop(0, n, step, (carry, ys))


def _checked(n: int, y_shapes, into):
    """`into`, raising where it is not the [n, ...] buffers of outputs `y_shapes`."""
    full = jax.tree.map(lambda a: jax.ShapeDtypeStruct((n, *a.shape), a.dtype), y_shapes)
    check_into(into, full)
    return into


def _distinct_buffers(n: int, avals):
    """Buffers [n, *aval.shape], no two of the same shape and dtype filled with the same value.

    A bool has two values, so a third bool buffer of one shape shares a fill (and costs a copy);
    the results never depend on the fills.
    """
    seen: dict[tuple, int] = {}

    def one(aval):
        key = (aval.shape, aval.dtype)
        index = seen[key] = seen.get(key, -1) + 1
        shape = (n, *aval.shape)
        if aval.dtype == np.bool_:
            return jnp.full(shape, index % 2 == 1, aval.dtype)
        if jnp.issubdtype(aval.dtype, np.number):
            return jnp.full(shape, index % 100, aval.dtype)  # fits every numeric dtype
        return jax.lax.empty(shape, aval.dtype)  # e.g. PRNG keys: no numeric fill

    return jax.tree.map(one, avals)
