"""MinAtar Breakout: bounce the ball off the paddle to break three rows of bricks."""

from __future__ import annotations

import jax.numpy as jnp
from flax import struct

from jaxsim.envs.minatar import _grid as grid
from jaxsim.envs.minatar._grid import i32, select
from jaxsim.envs.minatar.base import MinAtarEnv
from jaxsim.rng import Draws

# Bricks fill rows 1 ... 3; row r's ten cells are bits 10 (r - 1) ... 10 (r - 1) + 9 of one word.
_BRICK_ROWS = (1, 2, 3)
_ALL_BRICKS = (1 << (grid.SIZE * len(_BRICK_ROWS))) - 1
# The ball moves along diagonals: direction d = 0 up-left, 1 up-right, 2 down-right, 3 down-left.


@struct.dataclass
class BreakoutState:
    ball_x: jnp.ndarray  # int32
    ball_y: jnp.ndarray  # int32
    ball_dir: jnp.ndarray  # int32 in 0 ... 3
    pos: jnp.ndarray  # int32: the paddle's column (row 9)
    bricks: jnp.ndarray  # int32: 30 bits, rows 1 ... 3
    strike: jnp.ndarray  # bool: the ball hit a brick on the last step
    last_x: jnp.ndarray  # int32: the ball's last position (the trail channel)
    last_y: jnp.ndarray  # int32
    last_action: jnp.ndarray  # int32
    time: jnp.ndarray  # int32


class Breakout(MinAtarEnv):
    """Channels: paddle, ball, trail, brick. +1 per brick; ends when the ball passes the paddle.

    When the last brick is gone the three rows come back (on the ball's next visit to row 9).
    The game has no difficulty ramp.
    """

    id = "MinAtar/Breakout-v0"
    game = "breakout"
    state_type = BreakoutState
    num_channels = 4
    minimal_actions = (grid.NOOP, grid.LEFT, grid.RIGHT)
    draws = Draws(reset=1, step=1)  # which side the ball starts on; the sticky-action draw

    def init_state(self, u, params):
        left = u[0] < 0.5  # the original's randint(2) == 0
        zero = jnp.zeros(jnp.shape(u[0]), jnp.int32)
        ball_x = select(left, i32(0), i32(9))
        ball_y = zero + 3
        return BreakoutState(
            ball_x=ball_x,
            ball_y=ball_y,
            ball_dir=select(left, i32(2), i32(3)),
            pos=zero + 4,
            bricks=zero + _ALL_BRICKS,
            strike=jnp.zeros(jnp.shape(u[0]), jnp.bool_),
            last_x=ball_x,
            last_y=ball_y,
            last_action=zero,
            time=zero,
        )

    def game_dynamics(self, state, action, params, u):
        pos = select(action == grid.LEFT, jnp.maximum(state.pos - 1, 0), state.pos)
        pos = select(action == grid.RIGHT, jnp.minimum(pos + 1, 9), pos)
        last_x, last_y, d = state.ball_x, state.ball_y, state.ball_dir
        right = (d == 1) | (d == 2)
        down = (d == 2) | (d == 3)
        new_x = state.ball_x + select(right, i32(1), i32(-1))
        new_y = state.ball_y + select(down, i32(1), i32(-1))

        # Walls mirror the horizontal direction (0 <-> 1, 2 <-> 3).
        side = (new_x < 0) | (new_x > 9)
        new_x = jnp.clip(new_x, 0, 9)
        d = select(side, d ^ 1, d)

        # The first of: the ceiling, a brick, the paddle's row.
        top = new_y < 0
        in_bricks = (new_y >= _BRICK_ROWS[0]) & (new_y <= _BRICK_ROWS[-1])
        brick_bit = jnp.left_shift(
            i32(1), jnp.clip((new_y - _BRICK_ROWS[0]) * grid.SIZE + new_x, 0, 29)
        )
        hit_brick = ~top & in_bricks & ((state.bricks & brick_bit) != 0)
        breaks = hit_brick & ~state.strike
        bottom = ~top & ~hit_brick & (new_y == 9)
        bricks = select(breaks, state.bricks & ~brick_bit, state.bricks)
        bricks = select(bottom & (bricks == 0), i32(_ALL_BRICKS), bricks)
        above = bottom & (state.ball_x == pos)  # the paddle under the ball: straight back up
        beside = bottom & ~above & (new_x == pos)  # the paddle where it lands: back and across
        terminal = bottom & ~above & ~beside

        d = select(top | breaks | above, 3 - d, d)
        d = select(beside, d ^ 2, d)
        new_y = select(top, i32(0), new_y)
        new_y = select(breaks | above | beside, last_y, new_y)
        state = state.replace(
            ball_x=new_x,
            ball_y=new_y,
            ball_dir=d,
            pos=pos,
            bricks=bricks,
            strike=hit_brick,
            last_x=last_x,
            last_y=last_y,
        )
        return state, breaks.astype(jnp.float32), terminal

    def rows(self, state, params):
        paddle = grid.point(grid.empty_rows(state.pos), i32(9), state.pos)
        ball = grid.point(grid.empty_rows(state.pos), state.ball_y, state.ball_x)
        trail = grid.point(grid.empty_rows(state.pos), state.last_y, state.last_x)
        brick = grid.empty_rows(state.pos)
        for i, row in enumerate(_BRICK_ROWS):
            word = jnp.right_shift(state.bricks, grid.SIZE * i) & grid.FULL_ROW
            brick = grid.row_word(brick, row, word)
        return paddle, ball, trail, brick
