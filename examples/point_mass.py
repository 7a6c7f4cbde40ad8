"""A continuous task with per-environment physics: push a point mass in the plane to the origin.
Its mass and friction are params, so every environment of a rollout may have its own."""

import jax.numpy as jnp
from flax import struct

import jaxsim
from jaxsim.params import field


@struct.dataclass
class PointMassParams:
    mass: float = field(1.0, gt=0.0, doc="kg")
    friction: float = field(0.1, ge=0.0, doc="velocity lost per second, as a fraction")
    force: float = field(1.0, gt=0.0, doc="newtons at full action")
    dt: float = field(0.05, gt=0.0, doc="seconds per step")
    start: float = field(1.0, gt=0.0, doc="start positions are uniform in [-start, start]")
    max_episode_steps: int = field(200, ge=1, lt=2**31)


@struct.dataclass
class PointMassState:
    x: jnp.ndarray
    y: jnp.ndarray
    vx: jnp.ndarray
    vy: jnp.ndarray
    time: jnp.ndarray


class PointMass(jaxsim.Env):
    params_type = PointMassParams
    draws = jaxsim.Draws(reset=2)  # the start's x and y

    def init_state(self, u, p):
        x, y = (p.start * (2.0 * ui - 1.0) for ui in u)
        zero = jnp.zeros_like(x)
        return PointMassState(x, y, zero, zero, jnp.zeros(jnp.shape(x), jnp.int32))

    def dynamics(self, s, action, p):
        ax, ay = (jnp.clip(action[..., i], -1.0, 1.0) * p.force / p.mass for i in (0, 1))
        keep = 1.0 - p.friction * p.dt
        vx, vy = (s.vx + ax * p.dt) * keep, (s.vy + ay * p.dt) * keep
        x, y = s.x + vx * p.dt, s.y + vy * p.dt
        reward = -jnp.sqrt(x * x + y * y)
        return s.replace(x=x, y=y, vx=vx, vy=vy), reward, jnp.zeros_like(x, bool)

    def obs_fields(self, s, p):
        return s.x, s.y, s.vx, s.vy

    def observation_space(self, p):
        return jaxsim.Box(-jnp.inf, jnp.inf, (4,))

    def action_space(self, p):
        return jaxsim.Box(-1.0, 1.0, (2,))
