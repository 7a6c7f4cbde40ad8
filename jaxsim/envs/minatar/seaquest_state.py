"""MinAtar Seaquest's params and state: the submarine, its bullets, divers and enemy slots."""

from __future__ import annotations

import jax.numpy as jnp
from flax import struct

from jaxsim.envs.minatar.base import MinAtarParams
from jaxsim.params import field

# Enemy slots. At the ramp's end an enemy spawns every step and crosses the board in 29 (it
# moves every third), so about 30 are on it at most; a few more only if the last ramp steps come
# within ~40 steps of the first enemies that move every fourth step. A spawn finding no free
# slot is dropped (the original has no limit).
MAX_ENEMIES = 32


@struct.dataclass
class SeaquestParams(MinAtarParams):
    """The original's timings stay fixed: the slot bounds of `Seaquest` rest on them."""

    max_oxygen: int = field(200, ge=1, lt=2**24, doc="oxygen after surfacing (one per step)")


@struct.dataclass
class Bullet:
    """A friendly bullet (one entry of the original's f_bullets list)."""

    x: jnp.ndarray  # int32
    y: jnp.ndarray  # int32
    right: jnp.ndarray  # bool: moving right
    alive: jnp.ndarray  # bool


@struct.dataclass
class Diver:
    x: jnp.ndarray  # int32
    y: jnp.ndarray  # int32
    right: jnp.ndarray  # bool
    timer: jnp.ndarray  # int32: steps until it moves
    alive: jnp.ndarray  # bool


@struct.dataclass
class Enemies:
    """Fish and enemy subs, int32/bool [MAX_ENEMIES] each (a block: [B, MAX_ENEMIES]).

    The original keeps two lists in spawn order; here each slot carries its spawn number
    `order`, which orders fish among fish and subs among subs as the lists do. Slot k also holds
    the bullet that enemy sub k fired last: a sub fires every 11 steps and its bullet leaves the
    board within 10, and a freed slot is reused at the earliest a step later by an enemy whose
    first shot is 11 steps away, so a slot never has two bullets in flight.
    """

    x: jnp.ndarray
    y: jnp.ndarray
    right: jnp.ndarray  # bool
    move_timer: jnp.ndarray  # steps until it moves
    shot_timer: jnp.ndarray  # steps until it fires (subs)
    is_sub: jnp.ndarray  # bool
    order: jnp.ndarray  # spawn number
    alive: jnp.ndarray  # bool
    bullet_x: jnp.ndarray
    bullet_y: jnp.ndarray
    bullet_right: jnp.ndarray  # bool
    bullet_alive: jnp.ndarray  # bool


@struct.dataclass
class SeaquestState:
    sub_x: jnp.ndarray  # int32
    sub_y: jnp.ndarray  # int32
    sub_right: jnp.ndarray  # bool: the submarine faces right
    oxygen: jnp.ndarray  # int32
    diver_count: jnp.ndarray  # int32 (the original lets it go negative: see `Seaquest`)
    bullets: tuple  # 2 x Bullet, in the original list's order
    divers: tuple  # 2 x Diver, in list order
    enemies: Enemies
    spawned: jnp.ndarray  # int32: enemies spawned so far (the next spawn number)
    e_spawn_speed: jnp.ndarray  # int32: steps between enemy spawns (ramped)
    e_spawn_timer: jnp.ndarray  # int32
    d_spawn_timer: jnp.ndarray  # int32
    move_speed: jnp.ndarray  # int32: enemies move every move_speed + 1 steps (ramped)
    shot_timer: jnp.ndarray  # int32: the submarine's cool-down
    surface: jnp.ndarray  # bool: on the surface since the last dive
    ramp_index: jnp.ndarray  # int32
    last_action: jnp.ndarray  # int32
    time: jnp.ndarray  # int32
