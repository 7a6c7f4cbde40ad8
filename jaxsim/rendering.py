"""Drawing environments: `env.render(state, params)` and `jaxsim.render_gif`, on the host.

Each native environment has one small drawer that paints a state the way Gymnasium's
`render_mode="rgb_array"` does (same canvas size, geometry and colours; Gymnasium draws with
pygame, these with Pillow, so edges differ by a pixel of anti-aliasing). Pendulum's torque arrow
is left out: a jaxsim state holds no last action.

Drawing is numpy and Pillow work on concrete values: it never runs under `jax.jit` (a traced
state is an error that says so). Pillow is optional: `pip install 'jaxsim-rl[render]'`.

What to animate: `jaxsim.rollout` records observations, not states, so `render_gif` takes
either a `Trajectory` (its `obs`, turned back into states: every native observation determines
the physical state it shows) or states themselves (a state pytree with a leading time axis, with
or without an environment axis after it, or a list of one environment's states), e.g. the states
an evaluation loop collects.
"""

from __future__ import annotations

import dataclasses
import io
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from jaxsim.envs import classic_control as cc

EXTRA = "pip install 'jaxsim-rl[render]'"
WHITE, BLACK = (255, 255, 255), (0, 0, 0)
# Frames per second of Gymnasium's `metadata["render_fps"]`, the default speed of a GIF.
FPS = {cc.CartPole: 50, cc.Pendulum: 30, cc._MountainCarBase: 30, cc.Acrobot: 15}


def _pil():
    try:
        from PIL import Image, ImageDraw
    except ImportError as e:
        raise ImportError(f"rendering needs Pillow, which is not installed ({e}): {EXTRA}") from e
    return Image, ImageDraw


class _Canvas:
    """A white Pillow canvas in Gymnasium's drawing coordinates: origin at the bottom left, y up
    (Gymnasium draws upside down and flips the surface at the end)."""

    def __init__(self, width: int, height: int):
        image_cls, draw_cls = _pil()
        self.height = height
        self.image = image_cls.new("RGB", (width, height), WHITE)
        self.draw = draw_cls.Draw(self.image)

    def _xy(self, points):
        return [(float(x), self.height - float(y)) for x, y in points]

    def polygon(self, points, color):
        self.draw.polygon(self._xy(points), fill=color, outline=color)

    def circle(self, x, y, radius, color):
        (cx, cy), r = self._xy([(x, y)])[0], radius
        self.draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=color, outline=color)

    def line(self, points, color, width: int = 1):
        self.draw.line(self._xy(points), fill=color, width=width)

    def array(self) -> np.ndarray:
        return np.asarray(self.image, dtype=np.uint8)


def _rotated(points, angle, dx, dy):
    """`points` rotated by `angle` radians (counter-clockwise), then moved by (dx, dy)."""
    c, s = math.cos(angle), math.sin(angle)
    return [(x * c - y * s + dx, x * s + y * c + dy) for x, y in points]


def _box(left, right, top, bottom):
    return [(left, bottom), (left, top), (right, top), (right, bottom)]


# ------------------------------------------------------------------------------------- drawers
def _draw_cartpole(s, p) -> np.ndarray:
    width, height = 600, 400
    scale = width / (p.x_threshold * 2)
    pole_width, pole_len, cart_w, cart_h = 10.0, scale * (2 * p.length), 50.0, 30.0
    canvas = _Canvas(width, height)
    axle = cart_h / 4.0
    cart_x, cart_y = s.x * scale + width / 2.0, 100  # the middle of the cart, its top
    cart = _box(-cart_w / 2, cart_w / 2, cart_h / 2, -cart_h / 2)
    canvas.polygon([(x + cart_x, y + cart_y) for x, y in cart], BLACK)
    pole = _box(-pole_width / 2, pole_width / 2, pole_len - pole_width / 2, -pole_width / 2)
    canvas.polygon(_rotated(pole, -s.theta, cart_x, cart_y + axle), (202, 152, 101))
    canvas.circle(int(cart_x), int(cart_y + axle), int(pole_width / 2), (129, 132, 203))
    canvas.line([(0, cart_y), (width, cart_y)], BLACK)
    return canvas.array()


def _draw_pendulum(s, p) -> np.ndarray:
    dim, red = 500, (204, 77, 77)
    scale = dim / (2.2 * 2)
    offset, rod_len, rod_w = dim // 2, 1 * scale, 0.2 * scale
    canvas = _Canvas(dim, dim)
    angle = s.theta + math.pi / 2
    canvas.polygon(_rotated(_box(0, rod_len, rod_w / 2, -rod_w / 2), angle, offset, offset), red)
    canvas.circle(offset, offset, int(rod_w / 2), red)
    ((end_x, end_y),) = _rotated([(rod_len, 0)], angle, offset, offset)
    canvas.circle(int(end_x), int(end_y), int(rod_w / 2), red)
    canvas.circle(offset, offset, int(0.05 * scale), BLACK)  # the axle
    return canvas.array()


def _draw_mountain_car(s, p) -> np.ndarray:
    width, height = 600, 400
    scale = width / (p.max_position - p.min_position)
    car_w, car_h, clearance = 40, 20, 10

    def ground(x):
        return np.sin(3 * x) * 0.45 + 0.55

    canvas = _Canvas(width, height)
    xs = np.linspace(p.min_position, p.max_position, 100)
    canvas.line(list(zip((xs - p.min_position) * scale, ground(xs) * scale, strict=True)), BLACK)
    tilt = math.cos(3 * s.position)
    x0, y0 = (s.position - p.min_position) * scale, clearance + ground(s.position) * scale
    canvas.polygon(_rotated(_box(-car_w / 2, car_w / 2, car_h, 0), tilt, x0, y0), BLACK)
    for wheel in _rotated([(car_w / 4, 0), (-car_w / 4, 0)], tilt, x0, y0):
        canvas.circle(int(wheel[0]), int(wheel[1]), int(car_h / 2.5), (128, 128, 128))
    flag_x = int((p.goal_position - p.min_position) * scale)
    flag_y1 = int(ground(p.goal_position) * scale)
    flag_y2 = flag_y1 + 50
    canvas.line([(flag_x, flag_y1), (flag_x, flag_y2)], BLACK)
    flag = [(flag_x, flag_y2), (flag_x, flag_y2 - 10), (flag_x + 25, flag_y2 - 5)]
    canvas.polygon(flag, (204, 204, 0))
    return canvas.array()


def _draw_acrobot(s, p) -> np.ndarray:
    dim = 500
    # Gymnasium sizes the view by its class constants (link lengths 1 + 1 + 0.2); the second
    # link's length is not a jaxsim param (only its centre of mass is), so it is 1 here too.
    length_2 = 1.0
    scale = dim / ((p.link_length_1 + length_2 + 0.2) * 2)
    offset = dim / 2
    canvas = _Canvas(dim, dim)
    canvas.line(
        [(-2.2 * scale + offset, scale + offset), (2.2 * scale + offset, scale + offset)], BLACK
    )
    p1 = (
        p.link_length_1 * math.sin(s.theta1) * scale,
        -p.link_length_1 * math.cos(s.theta1) * scale,
    )
    joints = [(0.0, 0.0), p1]
    thetas = [s.theta1 - math.pi / 2, s.theta1 + s.theta2 - math.pi / 2]
    for (x, y), theta, length in zip(joints, thetas, (p.link_length_1, length_2), strict=True):
        link = _box(0, length * scale, 0.1 * scale, -0.1 * scale)
        canvas.polygon(_rotated(link, theta, x + offset, y + offset), (0, 204, 204))
        canvas.circle(int(x + offset), int(y + offset), int(0.1 * scale), (204, 204, 0))
    return canvas.array()


# Per environment class: the drawer, and the state an observation shows (for Trajectories).
DRAWERS: dict[type, Callable[[Any, Any], np.ndarray]] = {
    cc.CartPole: _draw_cartpole,
    cc.Pendulum: _draw_pendulum,
    cc._MountainCarBase: _draw_mountain_car,
    cc.Acrobot: _draw_acrobot,
}


def _zero_time(obs):
    return np.zeros(obs.shape[:-1], np.int32)


STATE_FROM_OBS: dict[type, Callable[[np.ndarray], Any]] = {
    cc.CartPole: lambda o: cc.CartPoleState(
        o[..., 0], o[..., 1], o[..., 2], o[..., 3], _zero_time(o)
    ),
    cc.Pendulum: lambda o: cc.PendulumState(
        np.arctan2(o[..., 1], o[..., 0]), o[..., 2], _zero_time(o)
    ),
    cc._MountainCarBase: lambda o: cc.MountainCarState(o[..., 0], o[..., 1], _zero_time(o)),
    cc.Acrobot: lambda o: cc.AcrobotState(
        np.arctan2(o[..., 1], o[..., 0]),
        np.arctan2(o[..., 3], o[..., 2]),
        o[..., 4],
        o[..., 5],
        _zero_time(o),
    ),
}


def default_fps(env) -> int | None:
    """Gymnasium's `render_fps` for `env` (None if it has no drawer): how fast it plays."""
    return next((FPS[c] for c in type(env).__mro__ if c in FPS), None)


def _lookup(table: dict[type, Any], env, what: str):
    for cls in type(env).__mro__:
        if cls in table:
            return table[cls]
    drawable = sorted(c.__name__.lstrip("_") for c in table)
    raise NotImplementedError(f"{env.id}: no {what} (environments with one: {drawable})")


def _host(tree, what: str):
    """`tree` with numpy leaves, or a TypeError if any leaf is traced (inside jit/vmap/scan)."""
    if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(tree)):
        raise TypeError(
            f"render: {what} is traced (inside jax.jit, vmap or scan); drawing runs on the host: "
            "return the states from the jitted function and render them outside it"
        )
    return jax.tree.map(np.asarray, jax.device_get(tree))


def _scalars(tree):
    return jax.tree.map(lambda leaf: leaf.item() if np.ndim(leaf) == 0 else leaf, tree)


def render_frame(env, state, params=None) -> np.ndarray:
    """One environment's `state` as Gymnasium's `rgb_array` shows it.

    Args:
      env: a native jaxsim environment (`jaxsim.make(...)`).
      state: one environment's state (unbatched, concrete: not inside `jax.jit`).
      params: its params (default `env.default_params`), each leaf of its declared shape.

    Returns:
      uint8 numpy array [height, width, 3] (CartPole and MountainCar 400x600, Pendulum and
      Acrobot 500x500).
    """
    draw = _lookup(DRAWERS, env, "drawer")
    params = env.default_params if params is None else params
    state, params = _host(state, "state"), _host(params, "params")
    env.check_state(state)
    env.check_params(params)
    for name, shape in env.param_shapes().items():
        if np.shape(getattr(params, name)) != shape:
            raise ValueError(
                f"{env.id}: params.{name} has shape {np.shape(getattr(params, name))}, but one "
                f"environment's is {shape}; pick one environment's params (render_gif's "
                "env_index does)"
            )
    return draw(_scalars(state), _scalars(params))


def states_from_obs(env, obs):
    """The states that observations `obs` [..., obs_dim] show, as `env.state_type` with leaves
    [...] (the step count is 0: an observation does not hold it). For drawing a `Trajectory`."""
    return _lookup(STATE_FROM_OBS, env, "state from observations")(_host(obs, "obs"))


def _frames_states(env, trajectory_or_states, env_index: int) -> list:
    """The sequence of one environment's states to draw, from what `render_gif` accepts."""
    from jaxsim.transition import Trajectory

    x = trajectory_or_states
    if isinstance(x, Trajectory):
        if x.obs is None:
            raise ValueError("render_gif: the Trajectory kept no obs (rollout(outputs=...))")
        x = states_from_obs(env, x.obs)  # leaves [n, num_envs]
    if isinstance(x, Sequence) and not isinstance(x, env.state_type):
        return list(x)
    if not isinstance(x, env.state_type):
        raise TypeError(
            f"render_gif: trajectory_or_states must be a Trajectory, a {env.state_type.__name__} "
            f"with a leading time axis, or a list of states; got {type(x).__name__}"
        )
    x = _host(x, "states")
    ndim = np.ndim(x.time)  # the step counter is a scalar per environment
    if ndim not in (1, 2):
        raise ValueError(
            f"render_gif: states must have leaves [T] or [T, num_envs], got time {np.shape(x.time)}"
        )
    if ndim == 2:
        num_envs = np.shape(x.time)[1]
        if not 0 <= env_index < num_envs:
            raise ValueError(f"render_gif: env_index={env_index} is not in [0, {num_envs})")
        x = jax.tree.map(lambda leaf: leaf[:, env_index], x)
    return [jax.tree.map(lambda leaf, t=t: leaf[t], x) for t in range(np.shape(x.time)[0])]


def _one_env_params(env, params, env_index: int):
    """`params` for environment `env_index`: a per-environment leaf [num_envs] is indexed."""
    params = _host(env.default_params if params is None else params, "params")
    shapes = env.param_shapes()
    return dataclasses.replace(
        params,
        **{
            f.name: getattr(params, f.name)[env_index]
            for f in dataclasses.fields(params)
            if np.ndim(getattr(params, f.name)) > len(shapes[f.name])
        },
    )


def render_gif(
    env,
    trajectory_or_states,
    path: str | os.PathLike,
    env_index: int = 0,
    fps: float | None = None,
    params=None,
    scale: float = 1.0,
) -> str:
    """Writes an animated GIF of one environment of a rollout (atomically).

    Args:
      env: the native environment the states belong to.
      trajectory_or_states: a `jaxsim.Trajectory` (its `obs` [n, num_envs, ...] are drawn, reset
        observations included, so episodes follow one another), or states: a state pytree with
        leaves [T] or [T, num_envs], or a list of one environment's states.
      path: the .gif to write.
      env_index: which environment of a batch to draw.
      fps: frames per second (default: Gymnasium's `render_fps` for the environment).
      params: the params the states ran under (default `env.default_params`); a per-environment
        leaf [num_envs] is indexed at `env_index`.
      scale: resize factor of every frame (e.g. 0.5 for a small file).

    Returns:
      The path written.
    """
    states = _frames_states(env, trajectory_or_states, env_index)
    if not states:
        raise ValueError("render_gif: no states to draw")
    if not scale > 0:
        raise ValueError(f"render_gif: scale must be > 0, got {scale}")
    fps = fps if fps is not None else (default_fps(env) or 30)
    if not fps > 0:
        raise ValueError(f"render_gif: fps must be > 0, got {fps}")
    params = _one_env_params(env, params, env_index)
    image_cls, _ = _pil()
    frames = []
    for state in states:
        image = image_cls.fromarray(render_frame(env, state, params))
        if scale != 1.0:
            size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
            image = image.resize(size, image_cls.Resampling.LANCZOS)
        frames.append(image.convert("P", palette=image_cls.Palette.ADAPTIVE, colors=64))
    buffer = io.BytesIO()
    duration = max(20, round(1000 / fps))  # GIF delays are in 10 ms; browsers slow < 20 ms
    frames[0].save(
        buffer, "GIF", save_all=True, append_images=frames[1:], duration=duration, loop=0
    )
    from jaxsim.files import atomic_write

    return str(atomic_write(path, buffer.getvalue()))
