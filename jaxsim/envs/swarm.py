"""Swarm: steer N coupled particles to a goal with one shared force, N a static power of two.

The task is global-input swarm control (magnetically actuated micro-robots steered by one field):
the agent applies the same planar force to every particle of a swarm whose particles have
different masses, so one push accelerates them unequally; all-pairs springs hold the swarm
together and linear drag damps it. The agent must bring the swarm's centroid to the goal and keep
it compact. Its state grows with the number of particles N (five float32 per particle: position,
velocity, mass, plus the step count, 20 N + 4 bytes), its observation does not (eight summary
statistics), so the family measures what fusing steps buys as a simulator's state grows.

Physics, per particle i with mass m_i, position r_i and velocity v_i (x and y alike):
    F_i = F_max * clip(a, -1, 1) - k (r_i - mean_j r_j) - c v_i
    v_i' = v_i + dt F_i / m_i,    r_i' = r_i + dt v_i'        (semi-implicit Euler)
The spring term is the all-pairs Hooke coupling (k / N) sum_j (r_j - r_i): a mean field, one
reduction per step, and its forces sum to zero, so without action and drag the total momentum
sum_i m_i v_i is conserved exactly and the energy sum_i m_i |v_i|^2 / 2 + k sum_i |r_i - mean r|^2
/ 2 to within the integrator's O(dt) oscillation.

Reward per step: 1 / (1 + d^2 + spread_cost * s^2) - action_cost * |clip(a)|^2, with d the
centroid's distance to the goal and s^2 the mean squared distance of particles to the centroid;
at most 1 and positive unless the action cost outweighs it, so ending an episode never pays.
Terminated: the centroid leaves the square arena [-arena, arena]^2. Truncated: at
`max_episode_steps` (200).
Reset: the swarm's centre uniform in [-reset_center, reset_center]^2, each particle uniform in a
square of half-width reset_spread around it, at rest, each mass uniform in [mass_low, mass_high].

The dynamics are written once for one environment ([N] leaves, under `vmap`) and for a block
of them in the fused kernel ([B, N] leaves): elementwise code, means over the last axis with
kept dimensions, and params broadcast with a trailing axis (`_per_particle`), the operations
the kernel's Triton lowering takes.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxsim.core import Env
from jaxsim.params import field
from jaxsim.rendering import Canvas
from jaxsim.rng import Draws
from jaxsim.spaces import Box

_F32_MAX = float(np.finfo(np.float32).max)
# Picks an action's x or y component with a reduction: Triton lowers no slice of a [B, 2] block.
_X, _Y = np.array([1.0, 0.0], np.float32), np.array([0.0, 1.0], np.float32)


@dataclasses.dataclass(frozen=True)
class SwarmConfig:
    num_particles: int = field(
        16, ge=1, le=4096, power_of_two=True, doc="particles in the swarm (fixes state shapes)"
    )


@struct.dataclass
class SwarmParams:
    dt: float = field(0.05, gt=0.0, doc="seconds per step (semi-implicit Euler)")
    spring: float = field(4.0, ge=0.0, doc="k: pull of the all-pairs springs toward the centroid")
    damping: float = field(0.5, ge=0.0, doc="c: linear drag per unit velocity")
    max_force: float = field(1.0, ge=0.0, doc="the force an action of magnitude 1 applies")
    goal_x: float = 0.0
    goal_y: float = 0.0
    arena: float = field(4.0, gt=0.0, doc="terminate once the centroid leaves [-arena, arena]^2")
    spread_cost: float = field(1.0, ge=0.0, doc="weight of the swarm's spread in the reward")
    action_cost: float = field(0.01, ge=0.0, doc="weight of |action|^2 in the reward")
    reset_center: float = field(2.0, ge=0.0, doc="half-width of the square the centre starts in")
    reset_spread: float = field(0.5, ge=0.0, doc="half-width of each particle's start square")
    mass_low: float = field(0.5, gt=0.0, doc="lightest particle mass drawn at reset")
    mass_high: float = field(1.5, gt=0.0, doc="heaviest particle mass drawn at reset")
    max_episode_steps: int = field(200, ge=1, lt=2**31, doc="truncate after this many steps")


@struct.dataclass
class SwarmState:
    """One environment: [num_particles] per particle field (a block: [B, num_particles])."""

    x: jnp.ndarray
    y: jnp.ndarray
    vx: jnp.ndarray
    vy: jnp.ndarray
    mass: jnp.ndarray  # drawn at reset: each episode steers a new batch of particles
    time: jnp.ndarray


def _per_particle(value):
    """A per-environment value ([] or a block's [B]) broadcastable against particles [..., N]."""
    return jnp.asarray(value, jnp.float32)[..., None]


def _mean(x, keepdims: bool = True):
    """The mean over particles (the last axis, a power of two), added in a fixed pairwise order.

    `jnp.mean` leaves the order of the additions to XLA, which picks it by the array's shape:
    a vmapped [num_envs, N] batch and the kernel's [B, N] block summed differently, and the
    scan and fused backends parted in the last bit (7e-7 at N = 256). Halving with equal
    splits (which Triton lowers) pins one order for every shape, backend and sharding.
    """
    n = x.shape[-1]
    while x.shape[-1] > 1:
        low, high = jnp.split(x, 2, axis=-1)
        x = low + high
    mean = x / np.float32(n)
    return mean if keepdims else mean.reshape(mean.shape[:-1])


def _centroid_and_spread(state):
    """(mean x, mean y, std x, std y) over particles, each [] per environment ([B] a block)."""
    dx, dy = state.x - _mean(state.x), state.y - _mean(state.y)
    std_x, std_y = (jnp.sqrt(_mean(d * d, keepdims=False)) for d in (dx, dy))
    return _mean(state.x, keepdims=False), _mean(state.y, keepdims=False), std_x, std_y


class Swarm(Env[SwarmState, SwarmParams]):
    """Steer a swarm of coupled particles of unequal masses to a goal with one shared force."""

    id = "Swarm-v0"
    params_type = SwarmParams
    state_type = SwarmState
    config_type = SwarmConfig
    # Centre (x, y), then per particle: offset x, offset y, mass.
    draws = Draws(reset=((), (), ("num_particles",), ("num_particles",), ("num_particles",)))

    def init_state(self, u, params):
        center_x, center_y, offset_x, offset_y, mass = u
        c, s = _per_particle(params.reset_center), _per_particle(params.reset_spread)

        def around(center, offset):
            return c * (2.0 * center[..., None] - 1.0) + s * (2.0 * offset - 1.0)

        low, high = _per_particle(params.mass_low), _per_particle(params.mass_high)
        x, y = around(center_x, offset_x), around(center_y, offset_y)
        return SwarmState(
            x=x,
            y=y,
            vx=jnp.zeros_like(x),
            vy=jnp.zeros_like(x),
            mass=low + mass * (high - low),
            time=jnp.zeros(jnp.shape(center_x), jnp.int32),
        )

    def dynamics(self, state, action, params):
        action = jnp.clip(action, -1.0, 1.0)
        force = _per_particle(params.max_force) * action  # [..., 2]
        k, c, dt = (_per_particle(v) for v in (params.spring, params.damping, params.dt))

        def advance(r, v, push):
            accel = (push - k * (r - _mean(r)) - c * v) / state.mass
            v = v + dt * accel
            return r + dt * v, v

        x, vx = advance(state.x, state.vx, jnp.sum(force * _X, axis=-1, keepdims=True))
        y, vy = advance(state.y, state.vy, jnp.sum(force * _Y, axis=-1, keepdims=True))
        next_state = state.replace(x=x, y=y, vx=vx, vy=vy)
        mean_x, mean_y, std_x, std_y = _centroid_and_spread(next_state)
        distance2 = (mean_x - params.goal_x) ** 2 + (mean_y - params.goal_y) ** 2
        spread2 = std_x**2 + std_y**2
        reward = 1.0 / (1.0 + distance2 + params.spread_cost * spread2)
        reward = reward - params.action_cost * jnp.sum(action * action, axis=-1)
        terminated = (jnp.abs(mean_x) > params.arena) | (jnp.abs(mean_y) > params.arena)
        return next_state, reward, terminated

    def obs_fields(self, state, params):
        """Goal minus centroid (x, y), mean velocity (x, y), spread of positions and velocities."""
        mean_x, mean_y, std_x, std_y = _centroid_and_spread(state)
        mean_vx, mean_vy, std_vx, std_vy = _centroid_and_spread(
            state.replace(x=state.vx, y=state.vy)
        )
        return (
            params.goal_x - mean_x,
            params.goal_y - mean_y,
            mean_vx,
            mean_vy,
            std_x,
            std_y,
            std_vx,
            std_vy,
        )

    # One frame per step of dt = 0.05 s.
    render_fps = 20

    def draw(self, state, params) -> np.ndarray:
        """The arena [-arena, arena]^2 seen from above: each particle a blue dot whose area
        grows with its mass, the goal a red dot (500x500 pixels)."""
        dim = 500
        scale = dim / (2 * params.arena)
        canvas = Canvas(dim, dim)
        # float64: a far-away (finite) float32 particle would overflow float32 arithmetic.
        x, y, mass = (np.ravel(np.asarray(v, np.float64)) for v in (state.x, state.y, state.mass))
        radius = 3.0 * np.sqrt(mass / params.mass_high) + 1.0
        x, y = (x + params.arena) * scale, (y + params.arena) * scale
        for px, py, r in zip(x, y, radius, strict=True):
            canvas.circle(px, py, r, (31, 119, 180))
        goal_x, goal_y = ((g + params.arena) * scale for g in (params.goal_x, params.goal_y))
        canvas.circle(goal_x, goal_y, 6, (214, 39, 40))
        return canvas.array()

    def observation_space(self, params):
        low = [-_F32_MAX] * 4 + [0.0] * 4
        return Box(np.asarray(low), np.full(8, _F32_MAX))

    def action_space(self, params):
        return Box(-1.0, 1.0, (2,))


class _SizedSwarm(Swarm):
    """`Swarm-v0` with its size in the id: `num_particles` is fixed by the id."""

    size: ClassVar[int]

    def __init__(self, **kwargs):
        n = kwargs.pop("num_particles", self.size)
        if n != self.size:
            raise ValueError(
                f"{self.id}: num_particles is {self.size} (the id names it), got {n!r}; use "
                f"jaxsim.make('Swarm-v0', num_particles={n!r}) for another size"
            )
        super().__init__(num_particles=self.size, **kwargs)

    def make_kwargs(self):
        kwargs = super().make_kwargs()
        del kwargs["num_particles"]  # the id says it
        return kwargs


class SwarmN4(_SizedSwarm):
    id, size = "Swarm-N4-v0", 4


class SwarmN16(_SizedSwarm):
    id, size = "Swarm-N16-v0", 16


class SwarmN64(_SizedSwarm):
    id, size = "Swarm-N64-v0", 64


class SwarmN256(_SizedSwarm):
    id, size = "Swarm-N256-v0", 256


SIZED = (SwarmN4, SwarmN16, SwarmN64, SwarmN256)  # Swarm-v0 takes any power of two up to 4096
