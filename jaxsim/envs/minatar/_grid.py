"""Grid helpers for the MinAtar games: 10 x 10 boards as row bitmasks, elementwise over lanes.

A game's board is described channel by channel as 10 int32 row words (bit x of word y set: the
cell at row y, column x is on). Words are cheap to build from object positions with shifts, and
a cell is one shift and mask away. Both backends record the words, 10 * C numbers per step (the
fused kernel as columns of [lanes]: no array of a size Triton cannot lower, 10 being no power of
two), and unpack them into the [10, 10, C] grid after their loop (`unpack`): a fifth of the
cells' bytes pass through the loop. Every helper works on arrays of any batch shape (scalars
under `vmap`, [B] in a kernel).
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

SIZE = 10  # the board is SIZE x SIZE
FULL_ROW = (1 << SIZE) - 1

# Full action set, as the original's `action_map`: no-op, left, up, right, down, fire.
NOOP, LEFT, UP, RIGHT, DOWN, FIRE = range(6)
NUM_ACTIONS = 6


def i32(x):
    return jnp.asarray(x, jnp.int32)


def select(cond, on_true, on_false):
    """`lax.select` with its operands broadcast to one shape and dtype (jnp.where's convenience,
    lowered as one select: the kernel's formulation)."""
    cond = jnp.asarray(cond, jnp.bool_)
    on_true, on_false = jnp.asarray(on_true), jnp.asarray(on_false)
    dtype = jnp.result_type(on_true, on_false)
    shape = jnp.broadcast_shapes(cond.shape, on_true.shape, on_false.shape)
    return lax.select(
        jnp.broadcast_to(cond, shape),
        jnp.broadcast_to(on_true.astype(dtype), shape),
        jnp.broadcast_to(on_false.astype(dtype), shape),
    )


def lookup(index, table):
    """`table[index]` for a static table of ints and an int32 index array (a chain of selects)."""
    out = jnp.full(jnp.shape(index), table[0], jnp.int32)
    for i, value in enumerate(table[1:], start=1):
        out = select(index == i, jnp.int32(value), out)
    return out


def empty_rows(like) -> tuple:
    """Ten all-off row words of `like`'s shape."""
    zero = jnp.zeros(jnp.shape(like), jnp.int32)
    return (zero,) * SIZE


def point(rows: tuple, y, x, on=True) -> tuple:
    """`rows` with cell (y, x) switched on where `on` (y, x int32 arrays; off-board: no cell)."""
    inside = (x >= 0) & (x < SIZE) & jnp.asarray(on, jnp.bool_)
    bit = jnp.left_shift(jnp.int32(1), jnp.clip(x, 0, SIZE - 1))
    return tuple(r | select(inside & (y == row), bit, jnp.int32(0)) for row, r in enumerate(rows))


def row_word(rows: tuple, row: int, word, on=True) -> tuple:
    """`rows` with the bits of `word` or-ed into row `row` (a static index) where `on`."""
    word = select(on, word, jnp.int32(0))
    return tuple(r | word if i == row else r for i, r in enumerate(rows))


def bit(word, x):
    """Bit x of each word (0 or 1, int32); x in [0, SIZE)."""
    return jnp.right_shift(word, x) & 1


def words(channels) -> tuple:
    """The observation packed: channel c's word y as component y * C + c (int32 values below
    2**10, exact in float32). A block of lanes writes these C * 10 columns, not 100 * C cells."""
    return tuple(rows[y] for y in range(SIZE) for rows in channels)


def unpack(packed, num_channels: int):
    """[..., 10 * C] packed words (`words`, any numeric dtype) -> int32 cells [..., 10, 10, C]:
    cell [y, x, c] is bit x of channel c's word y."""
    w = jnp.asarray(packed).astype(jnp.int32)
    w = w.reshape(*w.shape[:-1], SIZE, num_channels)  # [..., y, c]
    x = jnp.arange(SIZE, dtype=jnp.int32)[:, None]  # [x, 1]: broadcasts against [..., y, 1, c]
    return jnp.right_shift(w[..., :, None, :], x) & 1


def cells(packed_columns, num_channels: int) -> tuple:
    """One 0/1 int32 column per cell, in [y, x, c] row-major order, from the packed words'
    columns (`words`, possibly as float32): what a policy reads inside the fused kernel."""
    w = [jnp.asarray(col).astype(jnp.int32) for col in packed_columns]
    return tuple(
        jnp.right_shift(w[y * num_channels + c], x) & 1
        for y in range(SIZE)
        for x in range(SIZE)
        for c in range(num_channels)
    )
