"""MinAtar SpaceInvaders: a cannon shoots a marching block of aliens that shoots back."""

from __future__ import annotations

import jax.numpy as jnp
from flax import struct

from jaxsim.envs.minatar import _grid as grid
from jaxsim.envs.minatar._grid import i32, select
from jaxsim.envs.minatar.base import MinAtarEnv, MinAtarParams
from jaxsim.params import field
from jaxsim.rng import Draws

WAVE_ROW = 0b0011111100  # a fresh wave: columns 2 ... 7 of rows 0 ... 3
WAVE_ROWS = 4
BOTTOM = grid.SIZE - 1


@struct.dataclass
class SpaceInvadersParams(MinAtarParams):
    shot_cool_down: int = field(5, ge=0, lt=2**31, doc="steps between the cannon's shots")
    enemy_move_interval: int = field(
        12, ge=1, lt=2**31, doc="steps between the block's moves in the first wave"
    )
    min_move_interval: int = field(6, ge=1, lt=2**31, doc="the ramp stops at this interval")
    enemy_shot_interval: int = field(10, ge=0, lt=2**31, doc="steps between the aliens' shots")


@struct.dataclass
class SpaceInvadersState:
    """Grids are 10 int32 row words (bit x of word y: cell (y, x)); a block of lanes adds
    leading axes to every leaf."""

    pos: jnp.ndarray  # int32: the cannon's column, on row 9
    aliens: tuple  # 10 x int32
    friendly_bullets: tuple  # 10 x int32
    enemy_bullets: tuple  # 10 x int32
    alien_dir: jnp.ndarray  # int32: -1 left, +1 right
    enemy_move_interval: jnp.ndarray  # int32: the ramped interval, 12 down to 6
    alien_move_timer: jnp.ndarray  # int32: steps until the block moves
    alien_shot_timer: jnp.ndarray  # int32: steps until an alien fires
    shot_timer: jnp.ndarray  # int32: the cannon's cool-down
    ramp_index: jnp.ndarray  # int32: waves cleared under the ramp (the original's difficulty_ramp)
    last_action: jnp.ndarray  # int32
    time: jnp.ndarray  # int32


def _wave(zero) -> tuple:
    return tuple(zero + (WAVE_ROW if y < WAVE_ROWS else 0) for y in range(grid.SIZE))


def _popcount(word):
    """Set bits of each int32 word (SWAR: shifts, masks, one multiply)."""
    word = word - ((word >> 1) & 0x55555555)
    word = (word & 0x33333333) + ((word >> 2) & 0x33333333)
    word = (word + (word >> 4)) & 0x0F0F0F0F
    return (word * 0x01010101) >> 24


def _count(rows: tuple):
    return sum(_popcount(r) for r in rows)


def _union(rows: tuple):
    """One word: the columns occupied in any row."""
    out = rows[0]
    for r in rows[1:]:
        out = out | r
    return out


def _row(rows: tuple, y):
    """Row word y (an int32 array) of each lane."""
    out = jnp.zeros(jnp.shape(rows[0]), jnp.int32)
    for i, r in enumerate(rows):
        out = select(y == i, r, out)
    return out


def _on(word, x):
    return grid.bit(word, x) == 1


def _roll_columns(word, direction):
    """The original's np.roll of a row by `direction` (+1 right, -1 left), wrapping around."""
    right = ((word << 1) & grid.FULL_ROW) | (word >> BOTTOM)
    left = (word >> 1) | ((word & 1) << BOTTOM)
    return select(direction > 0, right, left)


def _shooter(aliens: tuple, pos):
    """(row, column) of the alien that fires: the occupied column nearest the cannon (ties to
    the smaller column, as the original's stable sort by distance), its lowest alien."""
    occupied = _union(aliens)
    best_rank = jnp.full(jnp.shape(pos), 1 << 20, jnp.int32)
    column = jnp.zeros(jnp.shape(pos), jnp.int32)
    for x in range(grid.SIZE):
        rank = jnp.abs(pos - x) * 16 + x
        better = _on(occupied, x) & (rank < best_rank)
        best_rank = select(better, rank, best_rank)
        column = select(better, i32(x), column)
    row = jnp.full(jnp.shape(pos), -1, jnp.int32)
    for y, word in enumerate(aliens):
        row = select(_on(word, column), i32(y), row)
    return row, column


class SpaceInvaders(MinAtarEnv):
    """Channels: cannon, alien, alien moving left, alien moving right, friendly bullet, enemy
    bullet. +1 per alien shot; ends when an alien or an enemy bullet reaches the cannon.

    The cannon (row 9) moves left or right and fires (`shot_cool_down`, 5 steps); its bullets
    rise a row per step, the aliens' fall one. When `alien_move_timer` runs out the block shifts
    a column, or, at the edge it heads for, a row down and turns; it moves every min(aliens left,
    `enemy_move_interval`, 12 in the first wave) steps. Every `enemy_shot_interval` (10) steps
    the lowest alien of the occupied column nearest the cannon fires. A cleared wave is replaced;
    under the difficulty ramp each new wave moves a step faster, down to `min_move_interval`
    (6). As in the original, the block's row shift wraps: a block on row 9 that steps down shows
    on row 0 in the observation that ends the episode.
    """

    id = "MinAtar/SpaceInvaders-v0"
    game = "space_invaders"
    params_type = SpaceInvadersParams
    state_type = SpaceInvadersState
    num_channels = 6
    minimal_actions = (grid.NOOP, grid.LEFT, grid.RIGHT, grid.FIRE)
    draws = Draws(step=1)  # the start is fixed; steps draw the sticky action

    def init_state(self, u, params):
        zero = jnp.zeros((), jnp.int32)
        return SpaceInvadersState(
            pos=zero + 5,
            aliens=_wave(zero),
            friendly_bullets=(zero,) * grid.SIZE,
            enemy_bullets=(zero,) * grid.SIZE,
            alien_dir=zero - 1,
            enemy_move_interval=zero + i32(params.enemy_move_interval),
            alien_move_timer=zero + i32(params.enemy_move_interval),
            alien_shot_timer=zero + i32(params.enemy_shot_interval),
            shot_timer=zero,
            ramp_index=zero,
            last_action=zero,
            time=zero,
        )

    def game_dynamics(self, state, action, params, u):
        zero = jnp.zeros(jnp.shape(state.pos), jnp.int32)
        fire = (action == grid.FIRE) & (state.shot_timer == 0)
        shot_timer = select(fire, i32(params.shot_cool_down), state.shot_timer)
        pos = select(action == grid.LEFT, jnp.maximum(state.pos - 1, 0), state.pos)
        pos = select(action == grid.RIGHT, jnp.minimum(pos + 1, BOTTOM), pos)
        friendly = grid.point(state.friendly_bullets, i32(BOTTOM), state.pos, fire)

        # Friendly bullets rise a row, enemy bullets fall one; both leave the board.
        friendly = (*friendly[1:], zero)
        enemy = (zero, *state.enemy_bullets[:-1])
        terminal = _on(enemy[BOTTOM], pos) | _on(state.aliens[BOTTOM], pos)

        aliens, direction = state.aliens, state.alien_dir
        move = state.alien_move_timer == 0
        occupied = _union(aliens)
        at_edge = ((direction < 0) & _on(occupied, 0)) | ((direction > 0) & _on(occupied, 9))
        turn = move & at_edge
        terminal = terminal | (turn & (aliens[BOTTOM] != 0))
        down = (aliens[-1], *aliens[:-1])  # np.roll: the bottom row comes back on top
        aliens = tuple(
            select(turn, d, select(move, _roll_columns(a, direction), a))
            for a, d in zip(aliens, down, strict=True)
        )
        alien_move_timer = select(
            move,
            jnp.minimum(_count(state.aliens), state.enemy_move_interval),
            state.alien_move_timer,
        )
        direction = select(turn, -direction, direction)
        terminal = terminal | _on(aliens[BOTTOM], pos)

        shoot = state.alien_shot_timer == 0
        alien_shot_timer = select(shoot, i32(params.enemy_shot_interval), state.alien_shot_timer)
        row, column = _shooter(aliens, pos)
        enemy = grid.point(enemy, row, column, shoot)

        kills = tuple(a & f for a, f in zip(aliens, friendly, strict=True))
        reward = _count(kills)
        aliens = tuple(a & ~k for a, k in zip(aliens, kills, strict=True))
        friendly = tuple(f & ~k for f, k in zip(friendly, kills, strict=True))

        cleared = _count(aliens) == 0
        ramp = cleared & (state.enemy_move_interval > params.min_move_interval)
        ramp = (ramp & params.difficulty_ramping).astype(jnp.int32)
        aliens = tuple(select(cleared, w, a) for a, w in zip(aliens, _wave(zero), strict=True))
        state = state.replace(
            pos=pos,
            aliens=aliens,
            friendly_bullets=friendly,
            enemy_bullets=enemy,
            alien_dir=direction,
            enemy_move_interval=state.enemy_move_interval - ramp,
            alien_move_timer=alien_move_timer - 1,
            alien_shot_timer=alien_shot_timer - 1,
            shot_timer=shot_timer - (shot_timer > 0).astype(jnp.int32),
            ramp_index=state.ramp_index + ramp,
        )
        return state, reward, terminal

    def rows(self, state, params):
        zero = jnp.zeros(jnp.shape(state.pos), jnp.int32)
        cannon = grid.point((zero,) * grid.SIZE, i32(BOTTOM), state.pos)
        left = state.alien_dir < 0
        return (
            cannon,
            state.aliens,
            tuple(select(left, a, zero) for a in state.aliens),
            tuple(select(left, zero, a) for a in state.aliens),
            state.friendly_bullets,
            state.enemy_bullets,
        )
