"""Drawing environments on the host: `env.render(state, params)` and `jaxsim.render_gif`.

An environment draws itself: a drawable one overrides `Env.draw` (and sets `render_fps`), using
the small Pillow canvas here; this module checks what it is given and animates frames, and
imports no environment. `Env.renderable` says whether an environment can draw; the others
refuse with NotImplementedError (and Gymnasium's `render_mode="rgb_array"` at make).

Drawing is numpy and Pillow work on concrete values: it never runs under `jax.jit` (a traced
state is an error that says so). Pillow is optional: `pip install 'jaxsim-rl[render]'`.

What to animate: `jaxsim.rollout` records observations, not states, so `render_gif` takes
either a `Trajectory` (its `obs`, drawn as they are where the picture is the observation,
`Env.draw_observation`, as MinAtar's grid; else turned back into states by `Env.state_from_obs`,
for the environments whose observation determines the physical state it shows) or states: a
list of one environment's states, or a state pytree with leaves [T, num_envs], e.g. the states
an evaluation loop collects. A state with leaves [K] is refused: K steps of one environment and
one step of K environments look alike, and the environment axis is never taken for time.
"""

from __future__ import annotations

import dataclasses
import io
import math
import os
from collections.abc import Sequence

import jax
import numpy as np

from atomicfiles import atomic_write

EXTRA = "pip install 'jaxsim-rl[render]'"
WHITE, BLACK = (255, 255, 255), (0, 0, 0)
# Pillow draws with C ints: a coordinate far outside the canvas is moved to this bound (still
# outside, so nothing shows) instead of overflowing.
_FAR = 1e6


def _pil():
    try:
        from PIL import Image, ImageDraw
    except ImportError as e:
        raise ImportError(f"rendering needs Pillow, which is not installed ({e}): {EXTRA}") from e
    return Image, ImageDraw


class Canvas:
    """A white Pillow canvas in Gymnasium's drawing coordinates: origin at the bottom left, y up
    (Gymnasium draws upside down and flips the surface at the end)."""

    def __init__(self, width: int, height: int):
        image_cls, draw_cls = _pil()
        self.width, self.height = width, height
        self.image = image_cls.new("RGB", (width, height), WHITE)
        self.draw = draw_cls.Draw(self.image)

    def _xy(self, points):
        return [(_near(x), _near(self.height - float(y))) for x, y in points]

    def polygon(self, points, color):
        self.draw.polygon(self._xy(points), fill=color, outline=color)

    def circle(self, x, y, radius, color):
        (cx, cy), r = self._xy([(x, y)])[0], min(float(radius), _FAR)
        self.draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=color, outline=color)

    def line(self, points, color, width: int = 1):
        self.draw.line(self._xy(points), fill=color, width=width)

    def array(self) -> np.ndarray:
        return np.asarray(self.image, dtype=np.uint8)


def _near(value) -> float:
    return min(max(float(value), -_FAR), _FAR)


def rotated(points, angle, dx, dy):
    """`points` rotated by `angle` radians (counter-clockwise), then moved by (dx, dy)."""
    c, s = math.cos(angle), math.sin(angle)
    return [(x * c - y * s + dx, x * s + y * c + dy) for x, y in points]


def box(left, right, top, bottom):
    """The four corners of an axis-aligned rectangle, for `Canvas.polygon`."""
    return [(left, bottom), (left, top), (right, top), (right, bottom)]


# ----------------------------------------------------------------------------------------- checks
def default_fps(env) -> int | None:
    """Gymnasium's `render_fps` for `env` (None if it cannot draw): how fast it plays."""
    return env.render_fps if env.renderable else None


def _require_drawable(env) -> None:
    if not env.renderable:
        raise NotImplementedError(
            f"{env.id}: this environment cannot draw itself (it does not override Env.draw)"
        )


def _host(tree, what: str):
    """`tree` with numpy leaves, or a TypeError if any leaf is traced (inside jit/vmap/scan)."""
    if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(tree)):
        raise TypeError(
            f"render: {what} is traced (inside jax.jit, vmap or scan); drawing runs on the host: "
            "return the states from the jitted function and render them outside it"
        )
    return jax.tree.map(np.asarray, jax.device_get(tree))


def _check_finite(env, tree, what: str) -> None:
    """A ValueError naming the first field of `tree` holding NaN or infinity: such a state (a
    diverged simulation, say) has no picture, and drawing it would fail deep inside Pillow."""
    for path, leaf in jax.tree.leaves_with_path(tree):
        leaf = np.asarray(leaf)
        if leaf.dtype.kind == "f" and not np.isfinite(leaf).all():
            bad = leaf[~np.isfinite(leaf)].flat[0]
            raise ValueError(
                f"render: {env.id} {what}{jax.tree_util.keystr(path)} is {bad}; a state or "
                "params value that is not finite cannot be drawn"
            )


def _check_one_state(env, state, what: str) -> None:
    """`env.check_state`, whose advice for a batch (vmap the step) does not fit drawing: a
    picture shows one environment, so a batch of states is refused with how to pick one."""
    try:
        env.check_state(state)
    except ValueError:
        batch = _batch_size(env, state)
        if batch is None:
            raise
        raise ValueError(
            f"render: {env.id} {what} is a batch of {batch} environments' states (every leaf "
            f"has a leading [{batch}] axis); a picture shows one environment: pick one, e.g. "
            f"jax.tree.map(lambda x: x[i], {what}) for environment i (render_gif draws a "
            "rollout's with env_index=)"
        ) from None


def _batch_size(env, state) -> int | None:
    """B if every leaf of `state` is one environment's with a leading [B] axis, else None."""
    one = [leaf.shape for leaf in jax.tree.leaves(env.state_template())]
    given = [np.shape(leaf) for leaf in jax.tree.leaves(state)]
    if len(one) != len(given) or not given:
        return None
    sizes = {g[0] if g and g[1:] == o else None for g, o in zip(given, one, strict=True)}
    return sizes.pop() if len(sizes) == 1 and None not in sizes else None


def _scalars(tree):
    return jax.tree.map(lambda leaf: leaf.item() if np.ndim(leaf) == 0 else leaf, tree)


def render_frame(env, state, params=None, what: str = "state") -> np.ndarray:
    """One environment's `state` drawn by `env.draw`, after checking it can be.

    Args:
      env: a drawable jaxsim environment (`env.renderable`).
      state: one environment's state (unbatched, concrete: not inside `jax.jit`), every float
        value finite.
      params: its params (default `env.default_params`), each leaf of its declared shape.
      what: how errors name `state` (render_gif names the frame).

    Returns:
      uint8 numpy array [height, width, 3] (e.g. CartPole 400x600, as Gymnasium's).
    """
    _require_drawable(env)
    params = env.default_params if params is None else params
    state, params = _host(state, what), _host(params, "params")
    _check_one_state(env, state, what)
    env.check_params(params)
    for name, shape in env.param_shapes().items():
        if np.shape(getattr(params, name)) != shape:
            raise ValueError(
                f"{env.id}: params.{name} has shape {np.shape(getattr(params, name))}, but one "
                f"environment's is {shape}; pick one environment's params (render_gif's "
                "env_index does)"
            )
    _check_finite(env, state, what)
    _check_finite(env, params, "params")
    return env.draw(_scalars(state), _scalars(params))


def states_from_obs(env, obs):
    """The states that observations `obs` [..., obs_dim] show, as `env.state_type` with leaves
    [...] (the step count is 0: an observation does not hold it). For drawing a `Trajectory`;
    a NotImplementedError for an environment whose observation does not determine its state."""
    _require_drawable(env)
    obs = _host(obs, "obs")
    try:
        return env.state_from_obs(obs)
    except NotImplementedError as e:
        raise NotImplementedError(
            f"{env.id}: its observations do not determine the state they show ({e}); draw "
            "states instead (a list of one environment's states, or leaves [T, num_envs])"
        ) from None


# ------------------------------------------------------------------------------------ animations
def _pick_env(x, env_index: int | None):
    """Leaves [T, num_envs] -> environment `env_index`'s [T] (0 if None)."""
    num_envs = np.shape(x.time)[1]
    index = 0 if env_index is None else env_index
    if not 0 <= index < num_envs:
        raise ValueError(f"render_gif: env_index={env_index} is not in [0, {num_envs})")
    return jax.tree.map(lambda leaf: leaf[:, index], x)


def _frames_states(env, trajectory_or_states, env_index: int | None) -> list:
    """The sequence of one environment's states to draw, from what `render_gif` accepts."""
    from jaxsim.rollout.trajectory import (  # Env's module needs no rollout code
        RolloutState,
        Trajectory,
    )

    x = trajectory_or_states
    if isinstance(x, Trajectory):
        if x.obs is None:
            raise ValueError("render_gif: the Trajectory kept no obs (rollout(outputs=...))")
        x = _pick_env(states_from_obs(env, x.obs), env_index)  # leaves [n, num_envs] -> [n]
        return [jax.tree.map(lambda leaf, t=t: leaf[t], x) for t in range(np.shape(x.time)[0])]
    if isinstance(x, Sequence) and not isinstance(x, str):
        return list(x)
    if isinstance(x, RolloutState):
        raise TypeError(
            "render_gif: a RolloutState (Trajectory.final_state) is one step of a batch, not a "
            "sequence of states; draw one of its environments with env.render"
        )
    if not isinstance(x, env.state_type):
        raise TypeError(
            f"render_gif: trajectory_or_states must be a Trajectory, a {env.state_type.__name__} "
            f"with leaves [T, num_envs], or a list of states; got {type(x).__name__}"
        )
    x = _host(x, "states")
    shape = np.shape(x.time)  # the step counter is a scalar per environment
    if len(shape) == 1:
        raise ValueError(
            f"render_gif: states with leaves [{shape[0]}] are ambiguous: {shape[0]} steps of one "
            f"environment, or one step of a batch of {shape[0]} (never drawn as time); pass one "
            "environment's states as a list, or leaves [T, num_envs] with env_index= to pick one"
        )
    if len(shape) != 2:
        raise ValueError(f"render_gif: states must have leaves [T, num_envs], got time {shape}")
    x = _pick_env(x, env_index)
    return [jax.tree.map(lambda leaf, t=t: leaf[t], x) for t in range(shape[0])]


def _observation_frames(env, trajectory, env_index: int | None, params) -> list:
    """The frames of a `Trajectory` of an environment that draws its observations
    (`Env.draws_observations`, e.g. MinAtar): environment `env_index`'s obs [n] drawn as they are,
    no state rebuilt."""
    if trajectory.obs is None:
        raise ValueError("render_gif: the Trajectory kept no obs (rollout(outputs=...))")
    obs = _host(trajectory.obs, "obs")
    shape = tuple(env.obs_shape)
    if obs.ndim != 2 + len(shape) or obs.shape[2:] != shape:
        raise ValueError(
            f"render_gif: {env.id} Trajectory.obs must be [n, num_envs, *{shape}], got {obs.shape}"
        )
    index = 0 if env_index is None else env_index
    if not 0 <= index < obs.shape[1]:
        raise ValueError(f"render_gif: env_index={env_index} is not in [0, {obs.shape[1]})")
    if obs.shape[0] == 0:
        raise ValueError("render_gif: no states to draw")
    _check_finite(env, obs, "obs")
    return [env.draw_observation(frame, _scalars(params)) for frame in obs[:, index]]


def _one_env_params(env, params, env_index: int | None):
    """`params` for environment `env_index`: a per-environment leaf [num_envs] is indexed."""
    params = _host(env.default_params if params is None else params, "params")
    shapes = env.param_shapes()
    batched = [
        f.name
        for f in dataclasses.fields(params)
        if np.ndim(getattr(params, f.name)) > len(shapes[f.name])
    ]
    if not batched:
        return params
    index = 0 if env_index is None else env_index
    num_envs = np.shape(getattr(params, batched[0]))[0]
    if not 0 <= index < num_envs:
        raise ValueError(f"render_gif: env_index={env_index} is not in [0, {num_envs}) (params)")
    return dataclasses.replace(params, **{name: getattr(params, name)[index] for name in batched})


def render_gif(
    env,
    trajectory_or_states,
    path: str | os.PathLike,
    env_index: int | None = None,
    fps: float | None = None,
    params=None,
    scale: float = 1.0,
) -> str:
    """Writes an animated GIF of one environment of a rollout (atomically).

    Args:
      env: the drawable environment the states belong to (`env.renderable`).
      trajectory_or_states: a `jaxsim.Trajectory` (its `obs` [n, num_envs, ...] are drawn, reset
        observations included, so episodes follow one another; for environments whose
        observation determines their state or is their picture), a state pytree with leaves
        [T, num_envs], or a list of one environment's states. Leaves [K] are refused as ambiguous.
      path: the .gif to write.
      env_index: which environment of [n, num_envs] to draw (default 0), and whose entries of
        per-environment params to use.
      fps: frames per second (default: Gymnasium's `render_fps` for the environment).
      params: the params the states ran under (default `env.default_params`); a per-environment
        leaf [num_envs] is indexed at `env_index`.
      scale: resize factor of every frame (e.g. 0.5 for a small file).

    Returns:
      The path written.
    """
    _require_drawable(env)
    if not scale > 0:
        raise ValueError(f"render_gif: scale must be > 0, got {scale}")
    fps = fps if fps is not None else (default_fps(env) or 30)
    if not fps > 0:
        raise ValueError(f"render_gif: fps must be > 0, got {fps}")
    from jaxsim.rollout.trajectory import Trajectory  # deferred, as in _frames_states

    if isinstance(trajectory_or_states, Trajectory) and env.draws_observations:
        params = _one_env_params(env, params, env_index)
        images = _observation_frames(env, trajectory_or_states, env_index, params)
    else:
        states = _frames_states(env, trajectory_or_states, env_index)
        if not states:
            raise ValueError("render_gif: no states to draw")
        params = _one_env_params(env, params, env_index)
        images = (
            render_frame(env, state, params, what=f"states[{t}]") for t, state in enumerate(states)
        )
    image_cls, _ = _pil()
    frames = []
    for array in images:
        image = image_cls.fromarray(array)
        if scale != 1.0:
            size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
            image = image.resize(size, image_cls.Resampling.LANCZOS)
        frames.append(image.convert("P", palette=image_cls.Palette.ADAPTIVE, colors=64))
    buffer = io.BytesIO()
    duration = max(20, round(1000 / fps))  # GIF delays are in 10 ms; browsers slow < 20 ms
    frames[0].save(
        buffer, "GIF", save_all=True, append_images=frames[1:], duration=duration, loop=0
    )
    return str(atomic_write(path, buffer.getvalue()))
