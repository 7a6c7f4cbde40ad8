"""MinAtar Asterix: collect the gold and dodge the enemies that cross the screen in eight rows."""

from __future__ import annotations

import jax.numpy as jnp
from flax import struct

from jaxsim.envs.minatar import _grid as grid
from jaxsim.envs.minatar._grid import i32, select
from jaxsim.envs.minatar.base import MinAtarEnv, MinAtarParams
from jaxsim.params import field
from jaxsim.rng import Draws

NUM_SLOTS = 8  # entity slot i moves along row i + 1


@struct.dataclass
class AsterixParams(MinAtarParams):
    ramp_interval: int = field(100, ge=0, lt=2**31, doc="steps between difficulty increases")
    init_spawn_speed: int = field(10, ge=1, lt=2**31, doc="steps between spawns at the start")
    init_move_interval: int = field(5, ge=1, lt=2**31, doc="steps between entity moves at start")


@struct.dataclass
class AsterixState:
    player_x: jnp.ndarray  # int32
    player_y: jnp.ndarray  # int32 in 1 ... 8
    ent_x: tuple  # NUM_SLOTS int32 columns
    ent_alive: tuple  # NUM_SLOTS bool: the slot holds an entity
    ent_right: tuple  # NUM_SLOTS bool: it moves right (it entered on the left)
    ent_gold: tuple  # NUM_SLOTS bool: gold (reward) rather than an enemy (death)
    spawn_speed: jnp.ndarray  # int32
    spawn_timer: jnp.ndarray  # int32
    move_speed: jnp.ndarray  # int32
    move_timer: jnp.ndarray  # int32
    ramp_timer: jnp.ndarray  # int32
    ramp_index: jnp.ndarray  # int32
    last_action: jnp.ndarray  # int32
    time: jnp.ndarray  # int32


class Asterix(MinAtarEnv):
    """Channels: player, enemy, trail, gold. +1 per gold; ends when an enemy meets the player.

    With difficulty ramping, every `ramp_interval` + 1 steps entities spawn one step sooner (down
    to every step) and, every other time, move one step sooner.
    """

    id = "MinAtar/Asterix-v0"
    game = "asterix"
    params_type = AsterixParams
    state_type = AsterixState
    num_channels = 4
    minimal_actions = (grid.NOOP, grid.LEFT, grid.UP, grid.RIGHT, grid.DOWN)
    # The start is fixed; steps draw the sticky action, then a spawn's side, kind and slot.
    draws = Draws(step=4)

    def init_state(self, u, params):
        zero = jnp.zeros((), jnp.int32)
        off = jnp.zeros((), jnp.bool_)
        spawn_speed = zero + i32(params.init_spawn_speed)
        move_speed = zero + i32(params.init_move_interval)
        return AsterixState(
            player_x=zero + 5,
            player_y=zero + 5,
            ent_x=(zero,) * NUM_SLOTS,
            ent_alive=(off,) * NUM_SLOTS,
            ent_right=(off,) * NUM_SLOTS,
            ent_gold=(off,) * NUM_SLOTS,
            spawn_speed=spawn_speed,
            spawn_timer=spawn_speed,
            move_speed=move_speed,
            move_timer=move_speed,
            ramp_timer=zero + i32(params.ramp_interval),
            ramp_index=zero,
            last_action=zero,
            time=zero,
        )

    def game_dynamics(self, state, action, params, u):
        xs, alive = list(state.ent_x), list(state.ent_alive)
        right, gold = list(state.ent_right), list(state.ent_gold)

        # Spawn into a free slot drawn uniformly (nothing if every slot is taken).
        spawn = state.spawn_timer == 0
        new_right, new_gold = u[0] < 0.5, u[1] < 1.0 / 3.0
        free_count = sum(i32(~a) for a in alive)
        pick = jnp.minimum(
            jnp.floor(u[2] * free_count.astype(jnp.float32)).astype(jnp.int32), free_count - 1
        )
        rank = jnp.zeros_like(free_count)  # free slots before slot i
        for i in range(NUM_SLOTS):
            chosen = spawn & ~alive[i] & (rank == pick)
            rank = rank + i32(~alive[i])
            xs[i] = select(chosen, select(new_right, i32(0), i32(9)), xs[i])
            right[i] = select(chosen, new_right, right[i])
            gold[i] = select(chosen, new_gold, gold[i])
            alive[i] = alive[i] | chosen
        spawn_timer = select(spawn, state.spawn_speed, state.spawn_timer)

        px = select(action == grid.LEFT, jnp.maximum(state.player_x - 1, 0), state.player_x)
        px = select(action == grid.RIGHT, jnp.minimum(px + 1, 9), px)
        py = select(action == grid.UP, jnp.maximum(state.player_y - 1, 1), state.player_y)
        py = select(action == grid.DOWN, jnp.minimum(py + 1, 8), py)

        reward = jnp.zeros_like(px)
        terminal = jnp.zeros(jnp.shape(px), jnp.bool_)

        def collide(i, reward, terminal):
            meets = alive[i] & (xs[i] == px) & (py == i + 1)
            alive[i] = alive[i] & ~(meets & gold[i])  # gold is collected; an enemy stays
            return reward + i32(meets & gold[i]), terminal | (meets & ~gold[i])

        for i in range(NUM_SLOTS):
            reward, terminal = collide(i, reward, terminal)
        moves = state.move_timer == 0
        move_timer = select(moves, state.move_speed, state.move_timer)
        for i in range(NUM_SLOTS):
            x = select(moves & alive[i], xs[i] + select(right[i], i32(1), i32(-1)), xs[i])
            alive[i] = alive[i] & ((x >= 0) & (x <= 9))
            xs[i] = x
            reward, terminal = collide(i, reward, terminal)

        spawn_timer = spawn_timer - 1
        move_timer = move_timer - 1

        # The difficulty ramp: a countdown from ramp_interval, then a speed-up.
        spawn_speed, move_speed = state.spawn_speed, state.move_speed
        ramping = params.difficulty_ramping & ((spawn_speed > 1) | (move_speed > 1))
        counting = ramping & (state.ramp_timer >= 0)
        ramp = ramping & ~counting
        faster_moves = ramp & (move_speed > 1) & (state.ramp_index % 2 == 1)
        state = state.replace(
            player_x=px,
            player_y=py,
            ent_x=tuple(xs),
            ent_alive=tuple(alive),
            ent_right=tuple(right),
            ent_gold=tuple(gold),
            spawn_speed=select(ramp & (spawn_speed > 1), spawn_speed - 1, spawn_speed),
            spawn_timer=spawn_timer,
            move_speed=select(faster_moves, move_speed - 1, move_speed),
            move_timer=move_timer,
            ramp_timer=select(
                counting,
                state.ramp_timer - 1,
                select(ramp, i32(params.ramp_interval), state.ramp_timer),
            ),
            ramp_index=state.ramp_index + i32(ramp),
        )
        return state, reward.astype(jnp.float32), terminal

    def rows(self, state, params):
        empty = grid.empty_rows(state.player_x)
        player = grid.point(empty, state.player_y, state.player_x)
        enemy, trail, gold = empty, empty, empty
        for i in range(NUM_SLOTS):
            x, alive = state.ent_x[i], state.ent_alive[i]
            word = jnp.left_shift(i32(1), jnp.clip(x, 0, 9))
            enemy = grid.row_word(enemy, i + 1, word, alive & ~state.ent_gold[i])
            gold = grid.row_word(gold, i + 1, word, alive & state.ent_gold[i])
            back = x + select(state.ent_right[i], i32(-1), i32(1))
            shown = alive & (back >= 0) & (back <= 9)
            trail = grid.row_word(trail, i + 1, jnp.left_shift(i32(1), jnp.clip(back, 0, 9)), shown)
        return player, enemy, trail, gold
