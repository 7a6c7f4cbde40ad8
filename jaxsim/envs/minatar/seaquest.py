"""MinAtar Seaquest: a submarine shoots fish and enemy subs, rescues divers and must surface."""

from __future__ import annotations

import functools
import operator

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim.envs.minatar import _grid as grid
from jaxsim.envs.minatar._grid import i32, select
from jaxsim.envs.minatar.base import MinAtarEnv
from jaxsim.envs.minatar.seaquest_state import (
    MAX_ENEMIES,
    Bullet,
    Diver,
    Enemies,
    SeaquestParams,
    SeaquestState,
)
from jaxsim.rng import Draws

INIT_SPAWN_SPEED = 20
DIVER_SPAWN_SPEED = 30
INIT_MOVE_INTERVAL = 5
SHOT_COOL_DOWN = 5
ENEMY_SHOT_INTERVAL = 10
DIVER_MOVE_INTERVAL = 5
MAX_DIVERS = 6
_SLOT = np.arange(MAX_ENEMIES, dtype=np.int32)
_NONE = np.int32(2**30)  # above every spawn number


def _step_x(x, right):
    return x + select(right, i32(1), i32(-1))


def _off(x):
    return (x < 0) | (x >= grid.SIZE)


def _col(a):
    """A per-lane value broadcast against the enemy slots."""
    return jnp.asarray(a)[..., None]


def _any(mask):
    return jnp.max(mask.astype(jnp.int32), axis=-1) > 0


def _append(items: tuple, new, add):
    """The list `items` (two slots, list order) with `new` appended where `add`: into the first
    slot if it is free, else the second (the bounds in `Seaquest` keep one free)."""
    first, second = items

    def put(slot, where):
        return jax.tree.map(lambda old, value: select(where, value, old), slot, new)

    return put(first, add & ~first.alive), put(second, add & first.alive)


def _compact(items: tuple):
    """Two slots with the survivor first, keeping list order."""
    first, second = items
    shift = ~first.alive & second.alive
    first = jax.tree.map(lambda a, b: select(shift, b, a), first, second)
    return first, second.replace(alive=second.alive & ~shift)


_ROW16 = np.arange(16, dtype=np.int32)  # rows, padded to a power of two for the kernel


def _rows(alive, y, x) -> tuple:
    """10 row words with the cells (y, x) of the slots where `alive` (x off the board: none).

    Several slots may share a cell, so a word is an OR over slots, which the kernel's reductions
    (sum, max, min) do not give directly: each slot adds 1 to a 6-bit counter of its column in
    its row (two int32 words of five counters per row; 32 slots < 64 never overflow one), all
    rows at once as [..., slots, 16] masks, and a column is on where its counter is nonzero.
    """
    on = alive & ~_off(x)
    low = x < 5
    field = jnp.left_shift(i32(1), 6 * jnp.clip(select(low, x, x - 5), 0, 4))
    in_row = (on & (y >= 0))[..., None] & (y[..., None] == _ROW16)  # [..., slots, 16]
    lo = jnp.sum(select(in_row & low[..., None], field[..., None], i32(0)), axis=-2)
    hi = jnp.sum(select(in_row & ~low[..., None], field[..., None], i32(0)), axis=-2)
    word = jnp.zeros(jnp.shape(lo), jnp.int32)
    for c in range(5):
        word = word | jnp.left_shift((((lo >> (6 * c)) & 63) != 0).astype(jnp.int32), c)
        word = word | jnp.left_shift((((hi >> (6 * c)) & 63) != 0).astype(jnp.int32), c + 5)
    return tuple(jnp.sum(select(_ROW16 == row, word, i32(0)), axis=-1) for row in range(grid.SIZE))


def _or_rows(*channels) -> tuple:
    return tuple(functools.reduce(operator.or_, (c[y] for c in channels)) for y in range(grid.SIZE))


def _gauge(n):
    """A row word with the n lowest columns on (n in [0, 10])."""
    return jnp.left_shift(i32(1), jnp.clip(n, 0, grid.SIZE)) - 1


class Seaquest(MinAtarEnv):
    """Channels: sub front, sub back, friendly bullet, trail, enemy bullet, enemy fish, enemy
    sub, oxygen gauge, diver gauge, diver.

    The submarine (rows 0 ... 8) moves and fires sideways (cool-down 5); +1 per fish or enemy
    sub shot. Every `e_spawn_speed` steps an enemy (a sub with probability 1/3) enters a random
    row 1 ... 8 from a random side, unless an enemy heads the other way in that row; every 30
    steps a diver does. Enemies move every `move_speed + 1` steps, divers every 6; subs fire
    every 11. Oxygen (`max_oxygen`, 200) drops each step below the surface. Surfacing with
    divers refills it and drops one diver; with all six it drops them all and pays
    oxygen * 10 // max_oxygen. Under the ramp each surfacing spawns enemies a step sooner (down
    to 1) and, every other one, moves them a step faster (down to 2). Terminated: touching an
    enemy or enemy bullet, running out of oxygen, or surfacing without divers. Trails show
    where enemies and divers came from.

    Hidden state sits in fixed slots: two friendly bullets (a shot every 5 steps at most, each
    gone within 10), two divers (one every 30 steps, each gone within 60) and `MAX_ENEMIES`
    enemies, each slot also holding the last bullet of its sub. Lists keep the original's order
    where it decides an outcome (which of two enemies on one cell a bullet takes). The original
    removes entries with `list.remove`, which drops the first *equal* entry; entries equal in
    every field (cell, direction, timers) do not arise in play, and here each is its own slot.

    As in the original, surfacing with six divers leaves the count at -1 (its reset to 0 is
    followed by the usual decrement), which lets every later surfacing through without a
    diver; the count then only grows back with divers picked up.
    """

    id = "MinAtar/Seaquest-v0"
    game = "seaquest"
    params_type = SeaquestParams
    state_type = SeaquestState
    num_channels = 10
    minimal_actions = (grid.NOOP, grid.LEFT, grid.UP, grid.RIGHT, grid.DOWN, grid.FIRE)
    # The start is fixed; steps draw the sticky action, an enemy's side, kind and row, a diver's
    # side and row (the original's draws, in order).
    draws = Draws(step=6)

    def init_state(self, u, params):
        zero = jnp.zeros((), jnp.int32)
        no = zero != 0
        slots = jnp.zeros((*jnp.shape(zero), MAX_ENEMIES), jnp.int32)
        empty = slots != 0
        bullet = Bullet(zero, zero, no, no)
        diver = Diver(zero, zero, no, zero, no)
        enemies = Enemies(
            slots, slots, empty, slots, slots, empty, slots, empty, slots, slots, empty, empty
        )
        return SeaquestState(
            sub_x=zero + 5,
            sub_y=zero,
            sub_right=no,
            oxygen=zero + i32(params.max_oxygen),
            diver_count=zero,
            bullets=(bullet, bullet),
            divers=(diver, diver),
            enemies=enemies,
            spawned=zero,
            e_spawn_speed=zero + INIT_SPAWN_SPEED,
            e_spawn_timer=zero + INIT_SPAWN_SPEED,
            d_spawn_timer=zero + DIVER_SPAWN_SPEED,
            move_speed=zero + INIT_MOVE_INTERVAL,
            shot_timer=zero,
            surface=~no,
            ramp_index=zero,
            last_action=zero,
            time=zero,
        )

    def game_dynamics(self, state, action, params, u):
        u_side, u_kind, u_row, u_diver_side, u_diver_row = u
        zero = jnp.zeros(jnp.shape(state.sub_x), jnp.int32)
        en = state.enemies

        # An enemy spawns unless one in its row heads the other way.
        spawn = state.e_spawn_timer == 0
        right = u_side < 0.5
        row = 1 + jnp.minimum((u_row * 8).astype(jnp.int32), 7)
        blocked = _any(en.alive & (en.y == _col(row)) & (en.right != _col(right)))
        free = jnp.min(select(en.alive, i32(MAX_ENEMIES), _SLOT), axis=-1)
        new = _col(spawn & ~blocked) & (_SLOT == _col(free))
        en = en.replace(
            x=select(new, _col(select(right, i32(0), i32(9))), en.x),
            y=select(new, _col(row), en.y),
            right=select(new, _col(right), en.right),
            move_timer=select(new, _col(state.move_speed), en.move_timer),
            shot_timer=select(new, i32(ENEMY_SHOT_INTERVAL), en.shot_timer),
            is_sub=select(new, _col(u_kind < np.float32(1 / 3)), en.is_sub),
            order=select(new, _col(state.spawned), en.order),
            alive=en.alive | new,
        )
        spawned = state.spawned + _any(new).astype(jnp.int32)
        e_spawn_timer = select(spawn, state.e_spawn_speed, state.e_spawn_timer)

        d_spawn = state.d_spawn_timer == 0
        d_right = u_diver_side < 0.5
        d_row = 1 + jnp.minimum((u_diver_row * 8).astype(jnp.int32), 7)
        d_x = select(d_right, i32(0), i32(9))
        diver = Diver(d_x, d_row, d_right, zero + DIVER_MOVE_INTERVAL, d_spawn)
        divers = list(_append(state.divers, diver, d_spawn))
        d_spawn_timer = select(d_spawn, i32(DIVER_SPAWN_SPEED), state.d_spawn_timer)

        # The submarine fires or moves.
        fire = (action == grid.FIRE) & (state.shot_timer == 0)
        shot = Bullet(state.sub_x, state.sub_y, state.sub_right, fire)
        bullets = list(_append(state.bullets, shot, fire))
        shot_timer = select(fire, i32(SHOT_COOL_DOWN), state.shot_timer)
        left, rightward = action == grid.LEFT, action == grid.RIGHT
        sub_x = select(left, jnp.maximum(state.sub_x - 1, 0), state.sub_x)
        sub_x = select(rightward, jnp.minimum(sub_x + 1, 9), sub_x)
        sub_right = (state.sub_right & ~left) | rightward
        sub_y = select(action == grid.UP, jnp.maximum(state.sub_y - 1, 0), state.sub_y)
        sub_y = select(action == grid.DOWN, jnp.minimum(sub_y + 1, 8), sub_y)

        # Friendly bullets, last first: each takes the first fish (else sub) on its new cell.
        reward = zero
        for b in (1, 0):
            bullet = bullets[b]
            x = _step_x(bullet.x, bullet.right)
            alive = bullet.alive & ~_off(x)
            here = _col(alive) & en.alive & (en.x == _col(x)) & (en.y == _col(bullet.y))
            fish = here & ~en.is_sub
            target = select(_col(_any(fish)), fish, here & en.is_sub)
            first = jnp.min(select(target, en.order, _NONE), axis=-1)
            hit = _any(target)
            en = en.replace(alive=en.alive & ~(target & (en.order == _col(first))))
            reward = reward + hit.astype(jnp.int32)
            bullets[b] = bullet.replace(x=x, alive=alive & ~hit)

        # Divers, last first: picked up (while fewer than six are aboard) or moving on.
        count = state.diver_count
        for d in (1, 0):
            diver = divers[d]
            picked = diver.alive & (diver.x == sub_x) & (diver.y == sub_y) & (count < MAX_DIVERS)
            count = count + picked.astype(jnp.int32)
            rest = diver.alive & ~picked
            moves = rest & (diver.timer == 0)
            x = select(moves, _step_x(diver.x, diver.right), diver.x)
            timer = select(rest, diver.timer - 1, diver.timer)
            timer = select(moves, i32(DIVER_MOVE_INTERVAL), timer)
            gone = moves & _off(x)
            caught = moves & ~gone & (x == sub_x) & (diver.y == sub_y) & (count < MAX_DIVERS)
            count = count + caught.astype(jnp.int32)
            divers[d] = diver.replace(x=x, timer=timer, alive=rest & ~gone & ~caught)

        def advance(en, bullets, reward, kind):
            """Every enemy of `kind` (subs, or fish) moves; the original's list loop."""
            mine = en.alive & kind
            crash = _any(mine & (en.x == _col(sub_x)) & (en.y == _col(sub_y)))
            moves = mine & (en.move_timer == 0)
            x = select(moves, _step_x(en.x, en.right), en.x)
            timer = select(mine, en.move_timer - 1, en.move_timer)
            timer = select(moves, _col(state.move_speed), timer)
            gone = moves & _off(x)
            onto = moves & ~gone & (x == _col(sub_x)) & (en.y == _col(sub_y))
            crash = crash | _any(onto)
            # A bullet on the cell an enemy enters goes to the last-spawned such enemy (the
            # list is walked backwards), the first bullet of the list first.
            open_ = moves & ~gone & ~onto
            killed = jnp.zeros_like(open_)
            for b in (0, 1):
                bullet = bullets[b]
                on = open_ & ~killed & _col(bullet.alive)
                on = on & (x == _col(bullet.x)) & (en.y == _col(bullet.y))
                hit = _any(on)
                last = jnp.max(select(on, en.order, i32(-1)), axis=-1)
                killed = killed | (on & (en.order == _col(last)))
                bullets[b] = bullet.replace(alive=bullet.alive & ~hit)
                reward = reward + hit.astype(jnp.int32)
            en = en.replace(x=x, move_timer=timer, alive=en.alive & ~gone & ~killed)
            return en, reward, crash, mine

        en, reward, crash_sub, subs = advance(en, bullets, reward, en.is_sub)
        # Every sub fires on its timer, even one that left or was shot this step.
        fires = subs & (en.shot_timer == 0)
        en = en.replace(
            shot_timer=select(
                fires, i32(ENEMY_SHOT_INTERVAL), select(subs, en.shot_timer - 1, en.shot_timer)
            ),
            bullet_x=select(fires, en.x, en.bullet_x),
            bullet_y=select(fires, en.y, en.bullet_y),
            bullet_right=select(fires, en.right, en.bullet_right),
            bullet_alive=select(fires, ~_off(en.x), en.bullet_alive),
        )
        live = en.bullet_alive
        at_sub = live & (en.bullet_y == _col(sub_y))
        shot_before = _any(at_sub & (en.bullet_x == _col(sub_x)))
        bullet_x = select(live, _step_x(en.bullet_x, en.bullet_right), en.bullet_x)
        live = live & ~_off(bullet_x)
        shot_after = _any(live & (en.bullet_y == _col(sub_y)) & (bullet_x == _col(sub_x)))
        en = en.replace(bullet_x=bullet_x, bullet_alive=live)
        en, reward, crash_fish, _ = advance(en, bullets, reward, ~en.is_sub)
        terminal = crash_sub | shot_before | shot_after | crash_fish

        # Timers, oxygen, surfacing.
        def tick(t):
            return t - (t > 0).astype(jnp.int32)

        terminal = terminal | (state.oxygen <= 0)
        below = sub_y > 0
        oxygen = select(below, state.oxygen - 1, state.oxygen)
        arrive = ~below & ~state.surface
        terminal = terminal | (arrive & (count == 0))
        up = arrive & (count != 0)
        full = up & (count == MAX_DIVERS)
        reward = reward + select(full, oxygen * 10 // i32(params.max_oxygen), i32(0))
        count = select(up, select(full, i32(0), count) - 1, count)
        oxygen = select(up, i32(params.max_oxygen), oxygen)
        ramp = up & params.difficulty_ramping
        ramp = ramp & ((state.e_spawn_speed > 1) | (state.move_speed > 2))
        faster = ramp & (state.move_speed > 2) & (state.ramp_index % 2 == 1)
        sooner = ramp & (state.e_spawn_speed > 1)
        state = state.replace(
            sub_x=sub_x,
            sub_y=sub_y,
            sub_right=sub_right,
            oxygen=oxygen,
            diver_count=count,
            bullets=_compact(tuple(bullets)),
            divers=_compact(tuple(divers)),
            enemies=en,
            spawned=spawned,
            e_spawn_speed=state.e_spawn_speed - sooner.astype(jnp.int32),
            e_spawn_timer=tick(e_spawn_timer),
            d_spawn_timer=tick(d_spawn_timer),
            move_speed=state.move_speed - faster.astype(jnp.int32),
            shot_timer=tick(shot_timer),
            surface=(state.surface & ~below) | up,
            ramp_index=state.ramp_index + ramp.astype(jnp.int32),
        )
        return state, reward, terminal

    def rows(self, state, params):
        zero = jnp.zeros(jnp.shape(state.sub_x), jnp.int32)
        empty = (zero,) * grid.SIZE
        en = state.enemies
        back = state.sub_x + select(state.sub_right, i32(-1), i32(1))
        bullets = empty
        for bullet in state.bullets:
            bullets = grid.point(bullets, bullet.y, bullet.x, bullet.alive)
        divers, diver_trail = empty, empty
        for diver in state.divers:
            divers = grid.point(divers, diver.y, diver.x, diver.alive)
            behind = diver.x + select(diver.right, i32(-1), i32(1))
            diver_trail = grid.point(diver_trail, diver.y, behind, diver.alive)
        behind = en.x + select(en.right, i32(-1), i32(1))
        oxygen = _gauge(jnp.maximum(state.oxygen, 0) * 10 // i32(params.max_oxygen))
        aboard = jnp.clip(state.diver_count, 0, 9)
        return (
            grid.point(empty, state.sub_y, state.sub_x),
            grid.point(empty, state.sub_y, back),
            bullets,
            _or_rows(_rows(en.alive, en.y, behind), diver_trail),
            _rows(en.bullet_alive, en.bullet_y, en.bullet_x),
            _rows(en.alive & ~en.is_sub, en.y, en.x),
            _rows(en.alive & en.is_sub, en.y, en.x),
            grid.row_word(empty, 9, oxygen),
            grid.row_word(empty, 9, jnp.left_shift(_gauge(aboard), 9 - aboard)),
            divers,
        )
