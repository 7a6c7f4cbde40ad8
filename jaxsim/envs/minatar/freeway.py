"""MinAtar Freeway: lead the chicken across eight lanes of traffic, as often as 2500 steps allow."""

from __future__ import annotations

import jax.numpy as jnp
from flax import struct

from jaxsim.envs.minatar import _grid as grid
from jaxsim.envs.minatar._grid import i32, select
from jaxsim.envs.minatar.base import MinAtarEnv, MinAtarParams
from jaxsim.params import field
from jaxsim.rng import Draws

NUM_CARS = 8  # car i drives in row i + 1
_CHICKEN_X = 4


@struct.dataclass
class FreewayParams(MinAtarParams):
    time_limit: int = field(2500, ge=0, lt=2**31 - 1, doc="the episode ends after this + 1 steps")
    player_speed: int = field(3, ge=0, lt=2**31, doc="steps the chicken waits between moves")


@struct.dataclass
class FreewayState:
    car_x: tuple  # NUM_CARS int32 columns
    car_timer: tuple  # NUM_CARS int32: steps until each car moves
    car_speed: tuple  # NUM_CARS int32: +-1 ... +-5, the sign the direction, |speed| the period
    pos: jnp.ndarray  # int32: the chicken's row (column 4)
    move_timer: jnp.ndarray  # int32: steps until the chicken may move
    terminate_timer: jnp.ndarray  # int32: the episode ends when it goes below zero
    last_action: jnp.ndarray  # int32
    time: jnp.ndarray  # int32


def _speeds(u_speed, u_dir) -> tuple:
    """Each car's signed speed from two uniforms: the original's randint(1, 6) times the sign of
    rand() - 0.5 (a draw of exactly 0.5, speed 0 there, drives right here)."""
    return tuple(
        (1 + jnp.minimum(jnp.floor(us * 5).astype(jnp.int32), 4)) * select(ud < 0.5, -1, 1)
        for us, ud in zip(u_speed, u_dir, strict=True)
    )


class Freeway(MinAtarEnv):
    """Channels: chicken, car, then the car's trail by speed 1 ... 5. +1 per crossing.

    A car hitting the chicken sends it back to the bottom row; each crossing draws new car
    speeds. The episode ends (terminated, as the original's) after `time_limit` + 1 steps.
    """

    id = "MinAtar/Freeway-v0"
    game = "freeway"
    params_type = FreewayParams
    state_type = FreewayState
    num_channels = 7
    minimal_actions = (grid.NOOP, grid.UP, grid.DOWN)
    # Resets draw each car's speed, then each car's direction; steps the sticky action, then new
    # speeds and directions on a crossing.
    draws = Draws(reset=2 * NUM_CARS, step=1 + 2 * NUM_CARS)

    def init_state(self, u, params):
        zero = jnp.zeros(jnp.shape(u[0]), jnp.int32)
        speeds = _speeds(u[:NUM_CARS], u[NUM_CARS:])
        return FreewayState(
            car_x=(zero,) * NUM_CARS,
            car_timer=tuple(jnp.abs(s) for s in speeds),
            car_speed=speeds,
            pos=zero + 9,
            move_timer=zero + i32(params.player_speed),
            terminate_timer=zero + i32(params.time_limit),
            last_action=zero,
            time=zero,
        )

    def game_dynamics(self, state, action, params, u):
        can_move = state.move_timer == 0
        up = can_move & (action == grid.UP)
        down = can_move & (action == grid.DOWN)
        move_timer = select(up | down, i32(params.player_speed), state.move_timer)
        pos = select(up, jnp.maximum(state.pos - 1, 0), state.pos)
        pos = select(down, jnp.minimum(pos + 1, 9), pos)

        crossed = pos == 0
        new_speeds = _speeds(u[:NUM_CARS], u[NUM_CARS:])
        pairs = zip(new_speeds, state.car_speed, state.car_timer, strict=True)
        speeds, timers = zip(
            *((select(crossed, n, s), select(crossed, jnp.abs(n), t)) for n, s, t in pairs),
            strict=True,
        )
        pos = select(crossed, i32(9), pos)

        # Cars in order, as the original: a hit (before or after a car moves) resets the chicken.
        xs, new_timers = [], []
        for i in range(NUM_CARS):
            row, x, timer, speed = i + 1, state.car_x[i], timers[i], speeds[i]
            pos = select((x == _CHICKEN_X) & (pos == row), i32(9), pos)
            moves = timer == 0
            x = select(moves, x + select(speed > 0, i32(1), i32(-1)), x)
            x = select(x < 0, i32(9), select(x > 9, i32(0), x))
            pos = select(moves & (x == _CHICKEN_X) & (pos == row), i32(9), pos)
            xs.append(x)
            new_timers.append(select(moves, jnp.abs(speed), timer - 1))

        move_timer = move_timer - (move_timer > 0).astype(jnp.int32)
        terminate_timer = state.terminate_timer - 1
        state = state.replace(
            car_x=tuple(xs),
            car_timer=tuple(new_timers),
            car_speed=speeds,
            pos=pos,
            move_timer=move_timer,
            terminate_timer=terminate_timer,
        )
        return state, crossed.astype(jnp.float32), terminate_timer < 0

    def rows(self, state, params):
        empty = grid.empty_rows(state.pos)
        chicken = grid.point(empty, state.pos, i32(_CHICKEN_X))
        car = empty
        trails = [empty] * 5
        for i in range(NUM_CARS):
            x, speed = state.car_x[i], state.car_speed[i]
            car = grid.row_word(car, i + 1, jnp.left_shift(i32(1), x))
            back = x + select(speed > 0, i32(-1), i32(1))
            back = select(back < 0, i32(9), select(back > 9, i32(0), back))
            for k in range(5):
                on = jnp.abs(speed) == k + 1
                trails[k] = grid.row_word(trails[k], i + 1, jnp.left_shift(i32(1), back), on)
        return (chicken, car, *trails)
