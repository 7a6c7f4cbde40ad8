"""How the classic-control environments draw themselves, as Gymnasium's `rgb_array` does.

Same canvas sizes, geometry and colours as Gymnasium's (which draws with pygame, these with
Pillow, so edges differ by a pixel of anti-aliasing). Pendulum's torque arrow is left out: a
jaxsim state holds no last action. Each `draw_*` is an environment's `Env.draw` and each
`*_state` its `Env.state_from_obs` (every classic-control observation determines the physical
state it shows, so a `Trajectory`'s observations can be animated).
"""

from __future__ import annotations

import math

import numpy as np

from jaxsim.rendering import BLACK, Canvas, box, rotated


def _zero_time(obs):
    return np.zeros(obs.shape[:-1], np.int32)  # an observation does not hold the step count


# ---------------------------------------------------------------------------------------- CartPole
def draw_cartpole(env, state, params) -> np.ndarray:
    width, height = 600, 400
    scale = width / (params.x_threshold * 2)
    pole_width, pole_len, cart_w, cart_h = 10.0, scale * (2 * params.length), 50.0, 30.0
    canvas = Canvas(width, height)
    axle = cart_h / 4.0
    cart_x, cart_y = state.x * scale + width / 2.0, 100  # the middle of the cart, its top
    cart = box(-cart_w / 2, cart_w / 2, cart_h / 2, -cart_h / 2)
    canvas.polygon([(x + cart_x, y + cart_y) for x, y in cart], BLACK)
    pole = box(-pole_width / 2, pole_width / 2, pole_len - pole_width / 2, -pole_width / 2)
    canvas.polygon(rotated(pole, -state.theta, cart_x, cart_y + axle), (202, 152, 101))
    canvas.circle(int(cart_x), int(cart_y + axle), int(pole_width / 2), (129, 132, 203))
    canvas.line([(0, cart_y), (width, cart_y)], BLACK)
    return canvas.array()


def cartpole_state(env, obs):
    return env.state_type(obs[..., 0], obs[..., 1], obs[..., 2], obs[..., 3], _zero_time(obs))


# ---------------------------------------------------------------------------------------- Pendulum
def draw_pendulum(env, state, params) -> np.ndarray:
    dim, red = 500, (204, 77, 77)
    scale = dim / (2.2 * 2)
    offset, rod_len, rod_w = dim // 2, 1 * scale, 0.2 * scale
    canvas = Canvas(dim, dim)
    angle = state.theta + math.pi / 2
    canvas.polygon(rotated(box(0, rod_len, rod_w / 2, -rod_w / 2), angle, offset, offset), red)
    canvas.circle(offset, offset, int(rod_w / 2), red)
    ((end_x, end_y),) = rotated([(rod_len, 0)], angle, offset, offset)
    canvas.circle(int(end_x), int(end_y), int(rod_w / 2), red)
    canvas.circle(offset, offset, int(0.05 * scale), BLACK)  # the axle
    return canvas.array()


def pendulum_state(env, obs):
    return env.state_type(np.arctan2(obs[..., 1], obs[..., 0]), obs[..., 2], _zero_time(obs))


# ------------------------------------------------------------------------ MountainCar (both kinds)
def draw_mountain_car(env, state, params) -> np.ndarray:
    width, height = 600, 400
    low = params.min_position
    scale = width / (params.max_position - low)
    car_w, car_h, clearance = 40, 20, 10

    def ground(x):
        return np.sin(3 * x) * 0.45 + 0.55

    canvas = Canvas(width, height)
    xs = np.linspace(low, params.max_position, 100)
    canvas.line(list(zip((xs - low) * scale, ground(xs) * scale, strict=True)), BLACK)
    tilt = math.cos(3 * state.position)
    x0, y0 = (state.position - low) * scale, clearance + ground(state.position) * scale
    canvas.polygon(rotated(box(-car_w / 2, car_w / 2, car_h, 0), tilt, x0, y0), BLACK)
    for wheel in rotated([(car_w / 4, 0), (-car_w / 4, 0)], tilt, x0, y0):
        canvas.circle(int(wheel[0]), int(wheel[1]), int(car_h / 2.5), (128, 128, 128))
    flag_x = int((params.goal_position - low) * scale)
    flag_y1 = int(ground(params.goal_position) * scale)
    flag_y2 = flag_y1 + 50
    canvas.line([(flag_x, flag_y1), (flag_x, flag_y2)], BLACK)
    flag = [(flag_x, flag_y2), (flag_x, flag_y2 - 10), (flag_x + 25, flag_y2 - 5)]
    canvas.polygon(flag, (204, 204, 0))
    return canvas.array()


def mountain_car_state(env, obs):
    return env.state_type(obs[..., 0], obs[..., 1], _zero_time(obs))


# ----------------------------------------------------------------------------------------- Acrobot
def draw_acrobot(env, state, params) -> np.ndarray:
    dim = 500
    # Gymnasium sizes the view by its class constants (link lengths 1 + 1 + 0.2); the second
    # link's length is not a jaxsim param (only its centre of mass is), so it is 1 here too.
    length_1, length_2 = params.link_length_1, 1.0
    scale = dim / ((length_1 + length_2 + 0.2) * 2)
    offset = dim / 2
    canvas = Canvas(dim, dim)
    canvas.line(
        [(-2.2 * scale + offset, scale + offset), (2.2 * scale + offset, scale + offset)], BLACK
    )
    p1 = (length_1 * math.sin(state.theta1) * scale, -length_1 * math.cos(state.theta1) * scale)
    joints = [(0.0, 0.0), p1]
    thetas = [state.theta1 - math.pi / 2, state.theta1 + state.theta2 - math.pi / 2]
    for (x, y), theta, length in zip(joints, thetas, (length_1, length_2), strict=True):
        link = box(0, length * scale, 0.1 * scale, -0.1 * scale)
        canvas.polygon(rotated(link, theta, x + offset, y + offset), (0, 204, 204))
        canvas.circle(int(x + offset), int(y + offset), int(0.1 * scale), (204, 204, 0))
    return canvas.array()


def acrobot_state(env, obs):
    return env.state_type(
        np.arctan2(obs[..., 1], obs[..., 0]),
        np.arctan2(obs[..., 3], obs[..., 2]),
        obs[..., 4],
        obs[..., 5],
        _zero_time(obs),
    )
