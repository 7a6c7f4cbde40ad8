"""The environment interface: stateless `Env` objects with pure `reset` and `step`."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, ClassVar, Generic, TypeVar

import jax
import jax.numpy as jnp
from flax import struct

from jaxsim import params as params_lib
from jaxsim import rendering, rng
from jaxsim.rng import Draws
from jaxsim.spaces import Space

State = TypeVar("State")
Params = TypeVar("Params")


@struct.dataclass
class TimeStep:
    """What `Env.step` returns beside the new state (one environment, unbatched)."""

    obs: jax.Array
    reward: jax.Array  # float32 scalar
    terminated: jax.Array  # bool scalar: the MDP reached a terminal state
    truncated: jax.Array  # bool scalar: the time limit cut the episode
    info: dict[str, Any] = struct.field(default_factory=dict)


class Env(Generic[State, Params]):
    """A stateless environment: pure functions of (key, state, action, params).

    Writing one needs six things (docs/own_env.md walks through it):

    - `params_type`: a params dataclass (`@flax.struct.dataclass`) whose fields are declared
      with `jaxsim.params.field` (default, range), including `max_episode_steps`, the limit;
    - `init_state(u, params)`: a fresh state, from the reset's draws (`draws`, below);
    - `dynamics(state, action, params[, u]) -> (state, reward, terminated)`: one step of the
      MDP, leaving the step counter `state.time` (int32, which the state holds) alone;
    - `obs_fields(state, params)`: the observation: one array, or a tuple of scalar components
      (the kernel-friendly form: the fused kernel then carries them as columns);
    - `observation_space(params)` and `action_space(params)`: `jaxsim.Box` / `jaxsim.Discrete`.

    Optional, with defaults: `draws` (what the reset and the step draw; `jaxsim.Draws`; default:
    nothing), `id` (default: the class name; `jaxsim.register` names it), `config_type` (the
    static config that fixes array shapes, read as `self.config`), `state_type` (traced from
    `init_state`), the observation's layout (`obs_shape`, `obs_dtype`, ...: below), drawing.

    Written as elementwise jnp code over the state's fields, with uniforms rather than a key,
    the same functions run on one environment (under `vmap`, the scan backend) and on a block
    of environments inside a Pallas kernel (the fused backend); `jaxsim.check_env` says whether
    an environment can, and why not. The base class owns the time limit: `step` counts steps and
    sets `truncated` once `state.time` reaches `params.max_episode_steps`; `step` never resets.

    Environments compare and hash by (class, static config, params overrides): a jitted rollout
    compiled for one is reused for an equal one, and a change of static config recompiles.
    """

    params_type: ClassVar[type]
    config_type: ClassVar[type] = params_lib.NoConfig
    # What `init_state` and `dynamics` draw: uniforms (counter-based, the kernel draws them
    # too) or a PRNG key; see `jaxsim.rng.Draws`. Default: no draws.
    draws: ClassVar[Draws] = Draws()
    # -- optional: the observation's layout (inferred for an array or a tuple of scalars) --------
    # The observation's shape when `obs_fields` gives numbers per component that
    # `obs_from_components` turns into an array of this shape (MinAtar's [10, 10, C] grid, from
    # packed row words); `obs_fields` may give the whole array as its one component instead.
    # None: a vector of the components, or the one array `obs_fields` returns.
    obs_shape: ClassVar[tuple[int, ...] | None] = None
    # The observation's dtype, the observation space's: float32, or bool for a grid of cells
    # (MinAtar). Components stay float32 inside a step (the fused kernel's columns); the
    # observation is cast to this as it is stacked (`jaxsim.core.stack_obs`).
    obs_dtype: ClassVar[Any] = jnp.float32
    # Where set (with `obs_shape`), the dtype a rollout records `obs_fields`' components in,
    # rebuilding the observations with `obs_from_components` after its loop: one pass writes the
    # large array, where recording it in the loop fills it first, then writes it step by step.
    # MinAtar: uint16 row words, a fifth of the grid's bytes. None: the loop records the obs.
    obs_record_dtype: ClassVar[Any] = None
    # -- optional: for wrappers of other simulators ------------------------------------------------
    # True if a rollout should reset only the done environments, gathered, while few are done
    # (`jaxsim.rollout.step`): worth it where `init_state` costs far more than the dozen small
    # gathers and scatters around it (a physics engine's reset). A native reset is a few hashes:
    # there the gathering costs more than it saves (`python -m benchmarks.micro.compact_reset`).
    compact_reset: ClassVar[bool] = False
    # XLA:CPU compile options a program stepping this environment should use (a trainer's jit
    # reads them, e.g. agents'); the options a jaxlib does not know are for it to leave out.
    cpu_compiler_options: ClassVar[dict[str, Any]] = {}

    # The declarations this contract replaced, and what replaces each (a clear error at class
    # definition instead of an attribute silently ignored).
    _REPLACED: ClassVar[dict[str, str]] = {
        "num_reset_uniforms": "draws = jaxsim.Draws(reset=n)",
        "reset_shapes": "draws = jaxsim.Draws(reset=(shape, ...))",
        "num_step_uniforms": "draws = jaxsim.Draws(step=n)",
        "step_shapes": "draws = jaxsim.Draws(step=(shape, ...))",
        "stochastic": "draws = jaxsim.Draws(step='key')",
        "reset_with_key": "draws = jaxsim.Draws(reset='key')",
        "fused_refusal": "nothing: the fused backend checks the environment itself",
        "array_obs": "nothing: an obs_fields that returns one array is inferred",
    }

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        old = sorted(set(cls.__dict__) & set(Env._REPLACED))
        if old:
            raise TypeError(
                f"{cls.__name__}: "
                + "; ".join(
                    f"{name} is no longer read, declare {Env._REPLACED[name]}" for name in old
                )
            )
        if "id" not in cls.__dict__ and not any("id" in b.__dict__ for b in cls.__mro__[1:-1]):
            cls.id = cls.__name__
        if not isinstance(cls.draws, Draws):
            raise TypeError(f"{cls.__name__}.draws must be a jaxsim.Draws, got {cls.draws!r}")
        params_type = cls.__dict__.get("params_type")
        if params_type is not None:
            names = {f.name for f in dataclasses.fields(params_type)}
            if "max_episode_steps" not in names:
                raise TypeError(
                    f"{cls.__name__}.params_type ({params_type.__name__}) has no "
                    "max_episode_steps field; every environment declares its time limit, e.g. "
                    "max_episode_steps: int = jaxsim.params.field(500, ge=1, lt=2**31)"
                )

    def __init__(self, **kwargs):
        param_specs = {s.name: s for s in params_lib.specs(self.params_type)}
        config_specs = {s.name: s for s in params_lib.specs(self.config_type)}
        unknown = sorted(set(kwargs) - set(param_specs) - set(config_specs))
        if unknown:
            raise TypeError(
                f"{self.id}: unknown argument(s) {unknown}; params are {sorted(param_specs)}"
                + (f", static config is {sorted(config_specs)}" if config_specs else "")
            )
        config = {
            k: config_specs[k].check(self.id, v) for k, v in kwargs.items() if k in config_specs
        }
        self._config = self.config_type(**config)
        self._config_overrides = tuple(sorted(config.items()))
        overrides = {}
        for name, value in kwargs.items():
            if name in param_specs:
                spec = param_specs[name]
                overrides[name] = spec.check(self.id, value, spec.resolve_shape(self._config))
        self._overrides = tuple(sorted(overrides.items()))
        defaults = {}
        for spec in param_specs.values():
            shape = spec.resolve_shape(self._config)
            if shape:  # array-valued: the scalar default broadcast to the declared shape
                defaults[spec.name] = spec.check(self.id, spec.default, shape)
        self._default_params = self.params_type(**(defaults | overrides))
        self._state_shapes = None  # one environment's state leaf shapes, on first check_state

    # -- to implement -----------------------------------------------------------------------------
    def init_state(self, u: tuple[jax.Array, ...], params: Params) -> State:
        raise NotImplementedError

    def dynamics(self, state: State, action: jax.Array, params: Params):
        raise NotImplementedError

    def obs_fields(self, state: State, params: Params) -> tuple[jax.Array, ...]:
        raise NotImplementedError

    def observation_space(self, params: Params) -> Space:
        raise NotImplementedError

    def obs_from_components(self, stacked: jax.Array) -> jax.Array:
        """[..., k] stacked `obs_fields` components -> obs[..., *obs_shape] (`obs_shape` set);
        by default read row-major."""
        return stacked.reshape(*stacked.shape[:-1], *self.obs_shape)

    def obs_cells(self, columns: tuple) -> tuple:
        """The observation's flat components (row-major over `obs_shape`) from `obs_fields`'
        columns, elementwise: what a policy inside the fused kernel reads. By default the same."""
        return tuple(columns)

    def action_space(self, params: Params) -> Space:
        raise NotImplementedError

    # -- provided ---------------------------------------------------------------------------------
    @property
    def config(self):
        """The static config (a frozen dataclass of `config_type`)."""
        return self._config

    @property
    def default_params(self) -> Params:
        """The class's defaults with `make`'s overrides; array-valued fields at their shapes."""
        return self._default_params

    def param_shapes(self) -> dict[str, tuple[int, ...]]:
        """Each params field's declared shape for one environment (resolved against config)."""
        return {s.name: s.resolve_shape(self._config) for s in params_lib.specs(self.params_type)}

    def params_axes(self, params: Params, num_envs: int, owner: str = "rollout"):
        """Which params leaves are per environment (0) or shared (None); see `jaxsim.params`."""
        self.check_params(params)
        specs = params_lib.specs(self.params_type)
        shapes = [s.resolve_shape(self._config) for s in specs]
        return params_lib.batch_axes(
            f"{owner}: params of {self.id}", specs, shapes, params, num_envs
        )

    def make_kwargs(self) -> dict[str, Any]:
        """`jaxsim.make(self.id, **self.make_kwargs())` rebuilds this environment."""
        kwargs = dict(self._config_overrides)
        for name, value in self._overrides:
            kwargs[name] = value.tolist() if hasattr(value, "tolist") else value
        return kwargs

    def observe(self, state: State, params: Params) -> jax.Array:
        return stack_obs(
            self, (jnp.asarray(f, jnp.float32) for f in self.obs_components(state, params))
        )

    def reset(self, key: jax.Array, params: Params) -> tuple[State, jax.Array]:
        """A fresh episode for one environment: (state, obs)."""
        self.check_params(params)
        seed = rng.seed_from_key(rng.check_key(f"{self.id}.reset", key))
        return self.reset_at(seed, jnp.uint32(0), jnp.uint32(0), params)

    def reset_at(self, seed, index, counter, params: Params) -> tuple[State, jax.Array]:
        """Counter-based reset: the draw for environment `index` at step `counter`.

        Elementwise in `index` and `counter`; this is what rollouts use for auto-reset.
        """
        draw = rng.ResetDraws.make(self, seed, jnp.asarray(index, jnp.uint32)).reset_draw(counter)
        state = self.init_state(draw, params)
        return state, self.observe(state, params)

    def reset_uniform_shapes(self) -> tuple[tuple[int, ...], ...]:
        """Each reset uniform's shape for one environment (`draws.reset` resolved)."""
        return self.draws.shapes("reset", self._config)

    def step_uniform_shapes(self) -> tuple[tuple[int, ...], ...]:
        """Each step uniform's shape for one environment (`draws.step` resolved)."""
        return self.draws.shapes("step", self._config)

    def reset_draw_shapes(self):
        """Shapes and dtypes of what `init_state` takes first, for one environment."""
        if self.draws.reset_key:
            return jax.ShapeDtypeStruct((2,), jnp.uint32)
        return tuple(jax.ShapeDtypeStruct(s, jnp.float32) for s in self.reset_uniform_shapes())

    def state_template(self):
        """One environment's state as shapes and dtypes (traced from `init_state`, once)."""
        template = self.__dict__.get("_state_template")
        if template is None:
            template = jax.eval_shape(
                self.init_state, self.reset_draw_shapes(), self.default_params
            )
            self.__dict__["_state_template"] = template
        return template

    @property
    def state_type(self) -> type:
        """The state's class: what `init_state` returns (a class may declare it instead)."""
        return type(self.state_template())

    @property
    def array_obs(self) -> bool:
        """True if `obs_fields` gives the whole observation as one array (traced, once), rather
        than one number per component (stacked into a vector, or into `obs_shape`)."""
        if self.obs_shape is not None:
            return False
        cached = self.__dict__.get("_array_obs")
        if cached is None:
            out = jax.eval_shape(self.obs_fields, self.state_template(), self.default_params)
            cached = not isinstance(out, tuple | list) or (len(out) == 1 and jnp.ndim(out[0]) > 0)
            self.__dict__["_array_obs"] = cached
        return cached

    def obs_components(self, state: State, params: Params) -> tuple:
        """`obs_fields` as a tuple of components (an array it returns is one component)."""
        out = self.obs_fields(state, params)
        return tuple(out) if isinstance(out, tuple | list) else (out,)

    def step(
        self, key: jax.Array, state: State, action: jax.Array, params: Params
    ) -> tuple[State, TimeStep]:
        """One step of one environment. Never resets; see `jaxsim.rollout` for auto-reset.

        `state` and `action` are one environment's (vmap `step` for a batch); a state or action
        of another shape or kind is a ValueError/TypeError naming it, raised while tracing.
        """
        self.check_params(params)
        self.check_state(state)
        action = self.check_action(action)
        u = None
        if self.step_uniform_shapes():  # counter-based, as a rollout's, from a seed of `key`
            seed = rng.seed_from_key(rng.check_key(f"{self.id}.step", key))
            u = rng.ResetDraws.make(self, seed, jnp.uint32(0)).step_draw(state.time + 1)
        state, obs_fields, reward, terminated, truncated = env_transition(
            self, state, action, params, key, u
        )
        obs = stack_obs(self, (jnp.asarray(f, jnp.float32) for f in obs_fields))
        return state, TimeStep(obs, reward, terminated, truncated)

    def check_state(self, state) -> None:
        """Raises unless `state` is one environment's state of this environment."""
        if not isinstance(state, self.state_type):
            raise TypeError(
                f"{self.id}: state must be a {self.state_type.__name__} (from env.reset), "
                f"got {type(state).__name__}"
            )
        if getattr(self, "_state_shapes", None) is None:
            self._state_shapes = {
                jax.tree_util.keystr(path): leaf.shape
                for path, leaf in jax.tree.leaves_with_path(self.state_template())
            }
        for path, leaf in jax.tree.leaves_with_path(state):
            name, shape = jax.tree_util.keystr(path), jnp.shape(leaf)
            expected = self._state_shapes.get(name)
            if shape != expected:
                raise ValueError(
                    f"{self.id}: state{name} has shape {shape}, but one environment's is "
                    f"{expected}; step takes one environment (jax.vmap it for a batch)"
                )

    def check_action(self, action) -> jax.Array:
        """`action` as an array, if it is one action of `action_space`'s shape and kind."""
        space = self.action_space(self.default_params)
        action = jnp.asarray(action)
        discrete = space.dtype == jnp.int32
        kind_ok = jnp.issubdtype(action.dtype, jnp.integer if discrete else jnp.floating)
        if action.shape != space.shape or not kind_ok:
            kind = "an integer" if discrete else "a float"
            raise ValueError(
                f"{self.id}: action must be {kind} array of shape {space.shape} for {space}, got "
                f"{action.dtype.name}{list(action.shape)}; step takes one environment's action"
            )
        return action.astype(space.dtype)

    def check_params(self, params) -> None:
        if not isinstance(params, self.params_type):
            raise TypeError(
                f"{self.id}: params must be {self.params_type.__name__} "
                f"(use env.default_params), got {type(params).__name__}"
            )

    # -- drawing (`jaxsim.rendering`): a drawable environment overrides `draw` -----------------
    # Gymnasium's `metadata["render_fps"]` for a drawable environment: how fast a GIF plays.
    render_fps: ClassVar[int | None] = None

    @property
    def renderable(self) -> bool:
        """Whether this environment draws itself (`render`, `render_gif`, `render_mode`)."""
        return type(self).draw is not Env.draw

    def draw(self, state: State, params: Params):
        """Hook: one environment's state as a uint8 numpy array [height, width, 3].

        `render` calls it with a checked, concrete state and params whose scalar leaves are
        Python numbers and every float finite; draw with `jaxsim.rendering.Canvas`.
        """
        raise NotImplementedError(f"{self.id}: this environment cannot draw itself")

    @property
    def draws_observations(self) -> bool:
        """Whether this environment's picture is its observation alone (`draw_observation`), so
        a `Trajectory`'s observations animate as they are (`render_gif`)."""
        return type(self).draw_observation is not Env.draw_observation

    def draw_observation(self, obs, params: Params):
        """Hook: one environment's numpy observation (`obs_shape`) as a uint8 array
        [height, width, 3], for an environment that shows nothing but its observation (MinAtar's
        grid); its `draw` then draws its state's observation with it."""
        raise NotImplementedError(f"{self.id}: this environment does not draw its observations")

    def state_from_obs(self, obs):
        """Hook: the states numpy observations [..., obs_dim] show (leaves [...]), where the
        observation determines the state, so a `Trajectory` can be animated; else raises."""
        raise NotImplementedError(f"{self.id}: the observation does not determine the state")

    def render(self, state: State, params: Params | None = None):
        """One environment's state drawn as Gymnasium's `rgb_array` would: a uint8 numpy array
        [height, width, 3], on the host, never under jit (`jaxsim.rendering.render_frame`)."""
        return rendering.render_frame(self, state, params)

    def _key(self):
        return type(self), self._config_overrides, self._overrides_key()

    def _overrides_key(self):
        return tuple(
            (k, (v.shape, v.tobytes()) if hasattr(v, "tobytes") else v) for k, v in self._overrides
        )

    def __eq__(self, other):
        return isinstance(other, Env) and other._key() == self._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.make_kwargs().items())
        return f"jaxsim.make({self.id!r}{', ' if args else ''}{args})"


# ------------------------------------------- one environment's transition and observation layout
def clip_action(env, action):
    """A Discrete action clipped into {0, ..., n - 1}; any other action unchanged."""
    space = env.action_space(env.default_params)
    n = getattr(space, "n", None)
    if n is None:
        return action
    return jnp.clip(action, 0, n - 1).astype(action.dtype)


# ------------------------------------------------------------------------------ the transition
def env_transition(env, state, action, params, key=None, u=None):
    """One step of one environment (or of a block of lanes), without auto-reset.

    `key` reaches the dynamics of an environment that draws a key each step (`env.draws.step ==
    "key"`) as a fourth argument; `u`, the step uniforms (`ResetDraws.step_draw`), those of an
    environment that draws uniforms; other dynamics take neither.

    Returns:
      (next_state, obs_fields, reward float32, terminated bool, truncated bool): the dynamics'
      state with `time` advanced, the observation's components (`Env.observe` stacks them),
      and truncation once `time` reaches `params.max_episode_steps` (as Gymnasium's TimeLimit).

    A Discrete action outside {0, ..., n - 1} is clipped to the nearest valid one (Gymnasium
    raises; `rollout(..., checks=True)` reports it). Box actions reach the dynamics as given,
    which clip them to their bounds as Gymnasium's do.
    """
    action = clip_action(env, action)
    if env.draws.step_key:
        next_state, reward, terminated = env.dynamics(state, action, params, key)
    elif env.step_uniform_shapes():
        next_state, reward, terminated = env.dynamics(state, action, params, u)
    else:
        next_state, reward, terminated = env.dynamics(state, action, params)
    next_state = next_state.replace(time=state.time + jnp.int32(1))
    truncated = next_state.time >= params.max_episode_steps
    # A constant reward or flag (a Python number) takes the lanes' shape: on a block of the
    # fused kernel there is no vmap to broadcast it.
    shape = jnp.shape(next_state.time)
    reward = jnp.broadcast_to(jnp.asarray(reward, jnp.float32), shape)
    terminated = jnp.broadcast_to(jnp.asarray(terminated, jnp.bool_), shape)
    return next_state, env.obs_components(next_state, params), reward, terminated, truncated


def stack_obs(env, columns: Iterable[jax.Array]) -> jax.Array:
    """Observation components -> obs[batch, *obs_shape] (the scan backend's layout).

    float32 components [batch] are stacked into obs[batch, obs_dim], turned into
    obs[batch, *env.obs_shape] where the environment declares one, of `env.obs_dtype` (float32;
    bool for MinAtar's grid); an environment with `array_obs` gives its whole observation as
    its one component, and one with `obs_shape` may too (a [batch, *obs_shape] array: cheaper
    to compile than its columns, where no kernel needs them).
    """
    columns = list(columns)
    if env.array_obs:
        return columns[0]
    shape = env.obs_shape
    if shape is not None and len(columns) == 1 and columns[0].shape[-len(shape) :] == shape:
        return columns[0].astype(env.obs_dtype)
    return expand_obs(env, jnp.stack(columns, axis=-1))


def record_obs(env, columns: Iterable[jax.Array]) -> jax.Array:
    """Observation components -> the [batch, k] `env.obs_record_dtype` array a rollout records
    for an environment that rebuilds its observations after the loop (`expand_obs`)."""
    return jnp.stack(list(columns), axis=-1).astype(env.obs_record_dtype)


def expand_obs(env, stacked: jax.Array) -> jax.Array:
    """[..., k] stacked components -> obs[..., *obs_shape] of `env.obs_dtype`."""
    obs = stacked if env.obs_shape is None else env.obs_from_components(stacked)
    return obs.astype(env.obs_dtype)
