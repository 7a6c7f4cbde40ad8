"""`MinAtarEnv`: what the MinAtar games share (params, sticky actions, grid, spaces, render)."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxsim.core import Env
from jaxsim.envs.minatar import _grid as grid
from jaxsim.params import field
from jaxsim.spaces import Box, Discrete

# The original sets no time limit (Freeway ends itself); the field's largest value is none.
NO_TIME_LIMIT = 2**31 - 1


@struct.dataclass
class MinAtarParams:
    """What every game takes; a game with constants of its own subclasses this."""

    sticky_action_prob: float = field(
        0.1, ge=0.0, le=1.0, doc="probability that a step repeats the last action taken"
    )
    difficulty_ramping: bool = field(True, doc="games with a difficulty ramp speed up over time")
    max_episode_steps: int = field(
        NO_TIME_LIMIT, ge=1, lt=2**31, doc="truncate after this many steps (default: never)"
    )


@dataclasses.dataclass(frozen=True)
class MinAtarConfig:
    minimal_action_set: bool = field(
        False, doc="actions index the game's minimal set (the original's -v1 ids), not all 6"
    )


class MinAtarEnv(Env):
    """A MinAtar game on the original's terms (Young and Tian's `minatar` package).

    The observation is the original's [10, 10, C] grid of cells, bool as the original's (its
    Gymnasium `observation_space` is `Box(0, 1, (10, 10, C), bool)`, and so is this one's;
    policies cast it to float where they compute on it). Each step first
    decides stickiness as the original's `Environment.act` does: with the step's first uniform
    `u[0] < sticky_action_prob` the last action taken is repeated. The state holds that last
    action (0, no-op, at reset: each episode starts as a freshly built original environment,
    whereas one original object carries it over from its previous episode).

    A game subclass declares `game`, `num_channels`, `minimal_actions` (indices into the full
    set) and `draws` (a step draws 1 uniform for the sticky action plus its own, shaped if any
    is array-valued), and implements:

    - `init_state(u, params)`: the start state, every leaf of `u[0]`'s shape (the batch shape:
      a scalar under `vmap`, [B] in the fused kernel) with an explicit dtype, `time` and
      `last_action` int32 zeros among them. Every game draws at least one reset uniform.
    - `game_dynamics(state, action, params, u)`: one step of the original's `Env.act` for the
      full-set `action` (stickiness resolved), `u` the step uniforms after the sticky one;
      returns (state, reward, terminal). Write it elementwise (`_grid.select`, no gathers).
    - `rows(state, params)`: the observation as C channels of 10 row words (`_grid`).
    """

    game: ClassVar[str]  # the original's module name, e.g. "breakout"
    num_channels: ClassVar[int]
    minimal_actions: ClassVar[tuple[int, ...]]
    params_type = MinAtarParams
    config_type = MinAtarConfig
    obs_dtype = jnp.bool_
    obs_record_dtype = jnp.uint16  # row words below 2**10

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "num_channels" in cls.__dict__:
            cls.obs_shape = (grid.SIZE, grid.SIZE, cls.num_channels)

    # -- for a game to implement ------------------------------------------------------------------
    def game_dynamics(self, state, action, params, u):
        raise NotImplementedError

    def rows(self, state, params) -> tuple:
        raise NotImplementedError

    # -- shared -----------------------------------------------------------------------------------
    def full_action(self, action):
        """The full-set action (0 ... 5) an agent's action means under the static config."""
        action = grid.i32(action)
        if self.config.minimal_action_set:
            return grid.lookup(action, self.minimal_actions)
        return action

    def dynamics(self, state, action, params, u):
        action = self.full_action(action)
        sticky = u[0] < params.sticky_action_prob
        action = grid.select(sticky, state.last_action, action)
        state, reward, terminal = self.game_dynamics(state, action, params, u[1:])
        state = state.replace(last_action=action)
        return state, jnp.asarray(reward, jnp.float32), jnp.asarray(terminal, jnp.bool_)

    def obs_fields(self, state, params):
        """The packed row words, 10 * C components (`obs_from_components` unpacks them): what
        the fused kernel writes and a rollout records (uint16, `obs_record_dtype`)."""
        return grid.words(self.rows(state, params))

    def obs_from_components(self, stacked):
        return grid.unpack(stacked, self.num_channels).astype(jnp.bool_)

    def obs_cells(self, columns):
        return grid.cells(columns, self.num_channels)

    def observation_space(self, params):
        return Box(0.0, 1.0, self.obs_shape, jnp.bool_)

    def action_space(self, params):
        n = len(self.minimal_actions) if self.config.minimal_action_set else grid.NUM_ACTIONS
        return Discrete(n)

    # -- drawing (`jaxsim.rendering`): the grid is all there is to see ---------------------------
    # The original's GUI shows a frame for 50 ms (`display_state(time=50)`).
    render_fps = 20

    def draw(self, state, params) -> np.ndarray:
        """One environment's board as uint8 [160, 160, 3] in the original's colours: its
        observation drawn by `draw_observation` (`env.render` calls this, checked)."""
        # `render` hands over Python scalars; the grid code wants the state's own dtypes back.
        state = jax.tree.map(lambda leaf, t: np.asarray(leaf, t.dtype), state, _template(self))
        return self.draw_observation(np.asarray(_observe(self, state, params)), params)

    def draw_observation(self, obs, params) -> np.ndarray:
        """A [10, 10, C] observation as the original's `rgb_array` colours it (black background,
        each channel one cubehelix colour, the highest channel on top), CELL pixels a cell."""
        obs = np.asarray(obs)
        if obs.shape != self.obs_shape:
            raise ValueError(
                f"{self.id}: draws one environment's observation of shape {self.obs_shape}, got "
                f"{obs.shape}"
            )
        return draw_grid(obs, CELL)


# Pixels per grid cell in a drawn frame (the original's `rgb_array` is one pixel a cell).
CELL = 16


@functools.cache
def _template(env):
    return jax.eval_shape(env.init_state, env.reset_draw_shapes(), env.default_params)


# One compiled observation per environment (envs hash by config), not hundreds of eager ops a frame.
@functools.partial(jax.jit, static_argnums=0)
def _observe(env, state, params):
    return env.observe(state, params)


def cubehelix_palette(n: int) -> np.ndarray:
    """float [n, 3]: seaborn's `color_palette("cubehelix", n)`, the original's channel colours:
    matplotlib's default cubehelix map (Green 2011: gamma 1, start 0.5, rotations -1.5, hue 1),
    as its 256-entry table, sampled at n evenly spaced interior points."""
    points = np.linspace(0.0, 1.0, n + 2)[1:-1]
    x = np.minimum((points * 256).astype(int), 255) / 255.0  # the table entry each point hits
    a = x * (1.0 - x) / 2.0
    phi = 2.0 * math.pi * (0.5 / 3.0 - 1.5 * x)
    coef = np.array([[-0.14861, 1.78277], [-0.29227, -0.90649], [1.97294, 0.0]])
    rgb = x[:, None] + a[:, None] * (
        coef[None, :, 0] * np.cos(phi)[:, None] + coef[None, :, 1] * np.sin(phi)[:, None]
    )
    return np.clip(rgb, 0.0, 1.0)


def draw_grid(obs: np.ndarray, cell: int = 16) -> np.ndarray:
    """uint8 [10 * cell, 10 * cell, 3] of a [10, 10, C] 0/1 grid, as the original colours it."""
    channels = obs.shape[-1]
    colours = np.concatenate([np.zeros((1, 3)), cubehelix_palette(channels)])
    index = np.max((obs > 0.5) * np.arange(1, channels + 1), axis=-1)
    image = np.round(colours[index] * 255).astype(np.uint8)
    return np.repeat(np.repeat(image, cell, axis=0), cell, axis=1)


def minimal_variant(cls: type[MinAtarEnv]) -> type[MinAtarEnv]:
    """The game's "-v1" id, as the original's Gymnasium registration: the minimal action set by
    default (`minimal_action_set=False` still gives all six)."""

    def __init__(self, **kwargs):
        kwargs.setdefault("minimal_action_set", True)
        cls.__init__(self, **kwargs)

    name = f"{cls.__name__}Minimal"
    env_id = cls.id.removesuffix("-v0") + "-v1"
    doc = f"{cls.id} with the minimal action set {cls.minimal_actions} by default."
    return type(name, (cls,), {"id": env_id, "__init__": __init__, "__doc__": doc})
