"""The classic-control family with Gymnasium 1.x semantics: constants, integrators, rewards.

Each environment's physics is elementwise jnp over its state fields (see `jaxsim.core.Env`):
it runs unchanged on one environment or on a block of them inside a Pallas kernel. Gymnasium
keeps float64 state; these keep float32, which the parity tests bound.
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np
from flax import struct

import jaxsim.envs.classic_control_drawing as drawing
from jaxsim.core import Env
from jaxsim.params import field
from jaxsim.rng import Draws
from jaxsim.spaces import Box, Discrete

_F32_MAX = float(np.finfo(np.float32).max)


def _steps(default: int):
    return field(default, ge=1, lt=2**31, doc="the time limit: truncate after this many steps")


def _pos(default: float, doc: str = ""):
    return field(default, gt=0.0, doc=doc)


def _nonneg(default: float, doc: str = ""):
    return field(default, ge=0.0, doc=doc)


def _between(u, low, high):
    """Maps uniforms in [0, 1) to [low, high)."""
    return low + u * (high - low)


def _time0(u):
    return jnp.zeros(jnp.shape(u), jnp.int32)


# ---------------------------------------------------------------------------------------- CartPole
@struct.dataclass
class CartPoleParams:
    gravity: float = 9.8
    masscart: float = _pos(1.0)
    masspole: float = _pos(0.1)
    length: float = _pos(0.5, "half the pole's length")
    force_mag: float = _nonneg(10.0)
    tau: float = _pos(0.02, "seconds between state updates (explicit Euler)")
    theta_threshold_radians: float = _pos(12 * 2 * math.pi / 360)
    x_threshold: float = _pos(2.4)
    reset_bound: float = _nonneg(0.05)
    max_episode_steps: int = _steps(500)


@struct.dataclass
class CartPoleState:
    x: jnp.ndarray
    x_dot: jnp.ndarray
    theta: jnp.ndarray
    theta_dot: jnp.ndarray
    time: jnp.ndarray


@dataclasses.dataclass(frozen=True)
class CartPoleConfig:
    hide_velocity: bool = field(
        False,
        doc="observe (x, theta) only, without the velocities: a partially observed task that "
        "a policy solves only with memory (observation shape (2,))",
    )


class CartPole(Env[CartPoleState, CartPoleParams]):
    """Balance a pole on a cart; +1 per step, ends when the pole or cart leaves its bounds.

    `make("CartPole-v1", hide_velocity=True)` (or the id "CartPole-NoVel-v1") observes the
    positions (x, theta) only: the same physics, rewards and episodes, a partially observed task.
    """

    id = "CartPole-v1"
    params_type = CartPoleParams
    state_type = CartPoleState
    config_type = CartPoleConfig
    draws = Draws(reset=4)
    render_fps, draw = 50, drawing.draw_cartpole

    def init_state(self, u, params):
        b = params.reset_bound
        x, x_dot, theta, theta_dot = (_between(ui, -b, b) for ui in u)
        return CartPoleState(x, x_dot, theta, theta_dot, _time0(u[0]))

    def dynamics(self, s, action, p):
        force = jnp.where(action == 1, p.force_mag, -p.force_mag)
        total_mass = p.masspole + p.masscart
        polemass_length = p.masspole * p.length
        costheta, sintheta = jnp.cos(s.theta), jnp.sin(s.theta)
        temp = (force + polemass_length * s.theta_dot**2 * sintheta) / total_mass
        thetaacc = (p.gravity * sintheta - costheta * temp) / (
            p.length * (4.0 / 3.0 - p.masspole * costheta**2 / total_mass)
        )
        xacc = temp - polemass_length * thetaacc * costheta / total_mass
        x = s.x + p.tau * s.x_dot
        x_dot = s.x_dot + p.tau * xacc
        theta = s.theta + p.tau * s.theta_dot
        theta_dot = s.theta_dot + p.tau * thetaacc
        terminated = (
            (x < -p.x_threshold)
            | (x > p.x_threshold)
            | (theta < -p.theta_threshold_radians)
            | (theta > p.theta_threshold_radians)
        )
        reward = jnp.ones_like(x)
        return s.replace(x=x, x_dot=x_dot, theta=theta, theta_dot=theta_dot), reward, terminated

    def obs_fields(self, s, params):
        if self.config.hide_velocity:
            return s.x, s.theta
        return s.x, s.x_dot, s.theta, s.theta_dot

    def observation_space(self, p):
        high = [p.x_threshold * 2, _F32_MAX, p.theta_threshold_radians * 2, _F32_MAX]
        if self.config.hide_velocity:
            high = high[0::2]
        return Box(-np.asarray(high), np.asarray(high))

    def action_space(self, p):
        return Discrete(2)

    def state_from_obs(self, obs):
        if self.config.hide_velocity:  # the picture shows positions only: velocities as 0
            x, theta = obs[..., 0], obs[..., 1]
            obs = np.stack([x, np.zeros_like(x), theta, np.zeros_like(x)], axis=-1)
        return drawing.cartpole_state(self, obs)


class CartPoleNoVel(CartPole):
    """CartPole-v1 observing (x, theta) only: `make("CartPole-v1", hide_velocity=True)`."""

    id = "CartPole-NoVel-v1"

    def __init__(self, **kwargs):
        super().__init__(**{"hide_velocity": True, **kwargs})


# ---------------------------------------------------------------------------------------- Pendulum
@struct.dataclass
class PendulumParams:
    max_speed: float = _pos(8.0)
    max_torque: float = _nonneg(2.0)
    dt: float = _pos(0.05)
    g: float = 10.0
    m: float = _pos(1.0)
    l: float = _pos(1.0)
    reset_theta: float = _nonneg(math.pi)
    reset_theta_dot: float = _nonneg(1.0)
    max_episode_steps: int = _steps(200)


@struct.dataclass
class PendulumState:
    theta: jnp.ndarray
    theta_dot: jnp.ndarray
    time: jnp.ndarray


def angle_normalize(x):
    return jnp.mod(x + math.pi, 2 * math.pi) - math.pi


class Pendulum(Env[PendulumState, PendulumParams]):
    """Swing a pendulum up and hold it; reward is minus a quadratic cost, never terminates."""

    id = "Pendulum-v1"
    params_type = PendulumParams
    state_type = PendulumState
    draws = Draws(reset=2)
    render_fps, draw, state_from_obs = 30, drawing.draw_pendulum, drawing.pendulum_state

    def init_state(self, u, p):
        theta = _between(u[0], -p.reset_theta, p.reset_theta)
        theta_dot = _between(u[1], -p.reset_theta_dot, p.reset_theta_dot)
        return PendulumState(theta, theta_dot, _time0(u[0]))

    def dynamics(self, s, action, p):
        u = jnp.clip(action[..., 0], -p.max_torque, p.max_torque)
        costs = angle_normalize(s.theta) ** 2 + 0.1 * s.theta_dot**2 + 0.001 * u**2
        theta_dot = (
            s.theta_dot + (3 * p.g / (2 * p.l) * jnp.sin(s.theta) + 3.0 / (p.m * p.l**2) * u) * p.dt
        )
        theta_dot = jnp.clip(theta_dot, -p.max_speed, p.max_speed)
        theta = s.theta + theta_dot * p.dt
        return s.replace(theta=theta, theta_dot=theta_dot), -costs, jnp.zeros_like(costs, bool)

    def obs_fields(self, s, params):
        return jnp.cos(s.theta), jnp.sin(s.theta), s.theta_dot

    def observation_space(self, p):
        high = np.asarray([1.0, 1.0, p.max_speed])
        return Box(-high, high)

    def action_space(self, p):
        return Box(-p.max_torque, p.max_torque, (1,))


# ------------------------------------------------------------------------ MountainCar (both kinds)
@struct.dataclass
class MountainCarState:
    position: jnp.ndarray
    velocity: jnp.ndarray
    time: jnp.ndarray


def _mountain_car_move(s, velocity, p):
    """Shared tail of both MountainCars: clip speed, move, stop at the left wall, check goal."""
    velocity = jnp.clip(velocity, -p.max_speed, p.max_speed)
    position = jnp.clip(s.position + velocity, p.min_position, p.max_position)
    velocity = jnp.where((position == p.min_position) & (velocity < 0), 0.0, velocity)
    terminated = (position >= p.goal_position) & (velocity >= p.goal_velocity)
    return s.replace(position=position, velocity=velocity), terminated


class _MountainCarBase(Env):
    state_type = MountainCarState
    draws = Draws(reset=1)
    render_fps, draw, state_from_obs = 30, drawing.draw_mountain_car, drawing.mountain_car_state

    def init_state(self, u, p):
        position = _between(u[0], p.reset_low, p.reset_high)
        return MountainCarState(position, jnp.zeros_like(position), _time0(u[0]))

    def obs_fields(self, s, params):
        return s.position, s.velocity

    def observation_space(self, p):
        return Box([p.min_position, -p.max_speed], [p.max_position, p.max_speed])


@struct.dataclass
class MountainCarParams:
    min_position: float = -1.2
    max_position: float = 0.6
    max_speed: float = _pos(0.07)
    goal_position: float = 0.5
    goal_velocity: float = 0.0
    force: float = _nonneg(0.001)
    gravity: float = 0.0025
    reset_low: float = -0.6
    reset_high: float = -0.4
    max_episode_steps: int = _steps(200)


class MountainCar(_MountainCarBase):
    """Drive an underpowered car up a hill with three discrete pushes; -1 per step."""

    id = "MountainCar-v0"
    params_type = MountainCarParams

    def dynamics(self, s, action, p):
        velocity = s.velocity + (action - 1) * p.force - jnp.cos(3 * s.position) * p.gravity
        s, terminated = _mountain_car_move(s, velocity, p)
        return s, jnp.full_like(s.position, -1.0), terminated

    def action_space(self, p):
        return Discrete(3)


@struct.dataclass
class MountainCarContinuousParams:
    min_action: float = -1.0
    max_action: float = 1.0
    min_position: float = -1.2
    max_position: float = 0.6
    max_speed: float = _pos(0.07)
    goal_position: float = 0.45
    goal_velocity: float = 0.0
    power: float = _nonneg(0.0015)
    gravity: float = 0.0025
    reset_low: float = -0.6
    reset_high: float = -0.4
    max_episode_steps: int = _steps(999)


class MountainCarContinuous(_MountainCarBase):
    """MountainCar with a continuous force; +100 at the goal minus 0.1 * action**2 per step."""

    id = "MountainCarContinuous-v0"
    params_type = MountainCarContinuousParams

    def dynamics(self, s, action, p):
        a = action[..., 0]
        force = jnp.clip(a, p.min_action, p.max_action)
        velocity = s.velocity + force * p.power - p.gravity * jnp.cos(3 * s.position)
        s, terminated = _mountain_car_move(s, velocity, p)
        # Gymnasium charges for the action as given, before clipping.
        reward = jnp.where(terminated, 100.0, 0.0) - a**2 * 0.1
        return s, reward, terminated

    def action_space(self, p):
        return Box(p.min_action, p.max_action, (1,))


# ----------------------------------------------------------------------------------------- Acrobot
@struct.dataclass
class AcrobotParams:
    dt: float = _pos(0.2)
    link_length_1: float = _pos(1.0)
    link_mass_1: float = _pos(1.0)
    link_mass_2: float = _pos(1.0)
    link_com_pos_1: float = _pos(0.5)
    link_com_pos_2: float = _pos(0.5)
    link_moi: float = _pos(1.0)
    max_vel_1: float = _pos(4 * math.pi)
    max_vel_2: float = _pos(9 * math.pi)
    torque: float = _nonneg(1.0, "actions 0, 1, 2 apply -torque, 0, +torque")
    g: float = 9.8
    reset_bound: float = _nonneg(0.1)
    max_episode_steps: int = _steps(500)


@struct.dataclass
class AcrobotState:
    theta1: jnp.ndarray
    theta2: jnp.ndarray
    dtheta1: jnp.ndarray
    dtheta2: jnp.ndarray
    time: jnp.ndarray


def _acrobot_derivs(p, y, a):
    """Equations of motion ("book" variant, as Gymnasium's default): d/dt of (th1, th2, w1, w2)."""
    theta1, theta2, dtheta1, dtheta2 = y
    m1, m2, l1 = p.link_mass_1, p.link_mass_2, p.link_length_1
    lc1, lc2, i1, i2, g = p.link_com_pos_1, p.link_com_pos_2, p.link_moi, p.link_moi, p.g
    cos2, sin2 = jnp.cos(theta2), jnp.sin(theta2)
    d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * cos2) + i1 + i2
    d2 = m2 * (lc2**2 + l1 * lc2 * cos2) + i2
    phi2 = m2 * lc2 * g * jnp.cos(theta1 + theta2 - math.pi / 2.0)
    phi1 = (
        -m2 * l1 * lc2 * dtheta2**2 * sin2
        - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin2
        + (m1 * lc1 + m2 * l1) * g * jnp.cos(theta1 - math.pi / 2)
        + phi2
    )
    ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * sin2 - phi2) / (
        m2 * lc2**2 + i2 - d2**2 / d1
    )
    ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
    return dtheta1, dtheta2, ddtheta1, ddtheta2


def _rk4(f, y, dt):
    """One classical Runge-Kutta step over a tuple state."""

    def axpy(a, k):
        return tuple(yi + a * ki for yi, ki in zip(y, k, strict=True))

    k1 = f(y)
    k2 = f(axpy(dt / 2, k1))
    k3 = f(axpy(dt / 2, k2))
    k4 = f(axpy(dt, k3))
    return tuple(
        yi + dt / 6.0 * (a + 2 * b + 2 * c + d)
        for yi, a, b, c, d in zip(y, k1, k2, k3, k4, strict=True)
    )


def _wrap(x, low, high):
    """Gymnasium's `wrap`: shift by whole periods until low <= x <= high (x == high stays)."""
    period = high - low
    x = jnp.where(x > high, x - period * jnp.ceil((x - high) / period), x)
    return jnp.where(x < low, x + period * jnp.ceil((low - x) / period), x)


class Acrobot(Env[AcrobotState, AcrobotParams]):
    """Swing the tip of a two-link arm above a line; -1 per step until it gets there."""

    id = "Acrobot-v1"
    params_type = AcrobotParams
    state_type = AcrobotState
    draws = Draws(reset=4)
    render_fps, draw, state_from_obs = 15, drawing.draw_acrobot, drawing.acrobot_state

    def init_state(self, u, p):
        b = p.reset_bound
        theta1, theta2, dtheta1, dtheta2 = (_between(ui, -b, b) for ui in u)
        return AcrobotState(theta1, theta2, dtheta1, dtheta2, _time0(u[0]))

    def dynamics(self, s, action, p):
        torque = (action - 1).astype(jnp.float32) * p.torque
        y = (s.theta1, s.theta2, s.dtheta1, s.dtheta2)
        theta1, theta2, dtheta1, dtheta2 = _rk4(lambda y: _acrobot_derivs(p, y, torque), y, p.dt)
        theta1 = _wrap(theta1, -math.pi, math.pi)
        theta2 = _wrap(theta2, -math.pi, math.pi)
        dtheta1 = jnp.clip(dtheta1, -p.max_vel_1, p.max_vel_1)
        dtheta2 = jnp.clip(dtheta2, -p.max_vel_2, p.max_vel_2)
        terminated = -jnp.cos(theta1) - jnp.cos(theta2 + theta1) > 1.0
        reward = jnp.where(terminated, 0.0, -1.0)
        s = s.replace(theta1=theta1, theta2=theta2, dtheta1=dtheta1, dtheta2=dtheta2)
        return s, reward, terminated

    def obs_fields(self, s, params):
        return (
            jnp.cos(s.theta1),
            jnp.sin(s.theta1),
            jnp.cos(s.theta2),
            jnp.sin(s.theta2),
            s.dtheta1,
            s.dtheta2,
        )

    def observation_space(self, p):
        high = np.asarray([1.0, 1.0, 1.0, 1.0, p.max_vel_1, p.max_vel_2])
        return Box(-high, high)

    def action_space(self, p):
        return Discrete(3)
