"""bsuite's Catch as a jaxsim environment: a ball falls down a 10 x 5 grid; move the paddle on
the bottom row under it. +1 for a catch, -1 for a miss; the episode ends when the ball lands."""

import jax.numpy as jnp
from flax import struct

import jaxsim
from jaxsim.params import field

ROWS, COLS = 10, 5


@struct.dataclass
class CatchParams:
    max_episode_steps: int = field(100, ge=1, lt=2**31, doc="the time limit")


@struct.dataclass
class CatchState:
    ball_row: jnp.ndarray
    ball_col: jnp.ndarray
    paddle_col: jnp.ndarray
    time: jnp.ndarray  # steps since reset: the library counts them


class Catch(jaxsim.Env):
    params_type = CatchParams
    draws = jaxsim.Draws(reset=1)  # one uniform per reset: the ball's column
    obs_shape = (ROWS, COLS)  # the observation: one number per cell, row by row

    def init_state(self, u, params):
        col = jnp.minimum(jnp.floor(u[0] * COLS), COLS - 1).astype(jnp.int32)
        zero = jnp.zeros_like(col)
        return CatchState(ball_row=zero, ball_col=col, paddle_col=zero + COLS // 2, time=zero)

    def dynamics(self, s, action, params):
        paddle = jnp.clip(s.paddle_col + action - 1, 0, COLS - 1)  # 0 left, 1 stay, 2 right
        row = s.ball_row + 1
        landed = row == ROWS - 1
        reward = jnp.where(landed, jnp.where(paddle == s.ball_col, 1.0, -1.0), 0.0)
        return s.replace(ball_row=row, paddle_col=paddle), reward, landed

    def obs_fields(self, s, params):
        return tuple(
            ((s.ball_row == r) & (s.ball_col == c)) | ((r == ROWS - 1) & (s.paddle_col == c))
            for r in range(ROWS)
            for c in range(COLS)
        )

    def observation_space(self, params):
        return jaxsim.Box(0.0, 1.0, (ROWS, COLS))

    def action_space(self, params):
        return jaxsim.Discrete(3)
