"""The environment interface: stateless `Env` objects with pure `reset` and `step`."""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar

import jax
import jax.numpy as jnp
from flax import struct

from jaxsim import params as params_lib
from jaxsim import rendering, rng
from jaxsim.autoreset import ResetDraws
from jaxsim.spaces import Space
from jaxsim.transition import env_transition, stack_obs

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

    Subclasses write their physics once, as elementwise jnp code over the fields of their state
    dataclass, so the same functions run on one environment (under `vmap`, the scan backend) and
    on a block of environments inside a Pallas kernel (the fused backend):

    - `init_state(u, params)`: a fresh state from `num_reset_uniforms` uniforms in [0, 1), each
      a scalar or, where `reset_shapes` declares it, an array (one uniform per particle, say);
    - `dynamics(state, action, params) -> (state, reward, terminated)`: one step of the MDP,
      leaving the step counter `state.time` alone (`dynamics(state, action, params, u)` with
      `num_step_uniforms` uniforms where the step draws random numbers);
    - `obs_fields(state, params)`: the observation's components, stacked on the last axis by
      `observe`.

    Settings come in two kinds (see `jaxsim.params`): `params_type`, a pytree of values that may
    differ between rollouts and between environments without recompiling, and `config_type`,
    the static config that fixes array shapes (read it as `self.config`). `jaxsim.make(id,
    **kwargs)` takes fields of both, validated against their declarations. The base class owns
    the time limit (`jaxsim.transition.env_transition`): `step` counts steps and sets
    `truncated` once `state.time` reaches `params.max_episode_steps`. `step` never resets.

    Environments compare and hash by (class, static config, params overrides): a jitted rollout
    compiled for one is reused for an equal one, and a change of static config recompiles.
    """

    id: ClassVar[str]
    params_type: ClassVar[type]
    state_type: ClassVar[type]
    config_type: ClassVar[type] = params_lib.NoConfig
    num_reset_uniforms: ClassVar[int]
    # The shape of each reset uniform for one environment, entries possibly naming static-config
    # fields (`("num_particles",)`: one uniform per particle); None: all scalars. Every
    # component is its own counter-based draw (`jaxsim.transition.ResetDraws`).
    reset_shapes: ClassVar[tuple[tuple[int | str, ...], ...] | None] = None
    # How many uniforms `dynamics(state, action, params, u)` takes as a fourth argument (0: it
    # takes none), and each one's shape as `reset_shapes` gives the reset uniforms' (None: all
    # scalars). Rollouts draw them counter-based from (seed, environment index, step counter)
    # on streams apart from the reset draws' (`ResetDraws.step_draw`), so the scan and fused
    # backends step through the same random outcomes; `step` draws them from its key.
    num_step_uniforms: ClassVar[int] = 0
    step_shapes: ClassVar[tuple[tuple[int | str, ...], ...] | None] = None
    # True if `dynamics(state, action, params, key)` takes a key; the classic-control
    # environments are deterministic, and the fused kernel runs only deterministic dynamics.
    stochastic: ClassVar[bool] = False
    # True if `init_state(key, params)` takes a raw PRNG key (uint32[2], drawn counter-based
    # from (seed, index, counter) as uniforms are) instead of uniforms: adapters of libraries
    # whose reset takes a key.
    reset_with_key: ClassVar[bool] = False
    # True if `obs_fields` returns one component, the whole observation of any shape, instead
    # of one number per component (`obs_fields` components are stacked into a vector).
    array_obs: ClassVar[bool] = False
    # The observation's shape when `obs_fields` gives numbers per component that
    # `obs_from_components` turns into an array of this shape (MinAtar's [10, 10, C] grid, from
    # packed row words); `obs_fields` may give the whole array as its one component instead.
    # None: a vector.
    obs_shape: ClassVar[tuple[int, ...] | None] = None
    # Where set (with `obs_shape`), the dtype a rollout records `obs_fields`' components in,
    # rebuilding the observations with `obs_from_components` after its loop: one pass writes the
    # large array, where recording it in the loop fills it first, then writes it step by step.
    # MinAtar: uint16 row words, a fifth of the grid's bytes. None: the loop records the obs.
    obs_record_dtype: ClassVar[Any] = None
    # The observation's dtype, the observation space's: float32, or bool for a grid of cells
    # (MinAtar). Components stay float32 inside a step (the fused kernel's columns); the
    # observation is cast to this as it is stacked (`jaxsim.transition.stack_obs`).
    obs_dtype: ClassVar[Any] = jnp.float32
    # True if a rollout should reset only the done environments, gathered, while few are done
    # (`jaxsim.autoreset`): worth it where `init_state` costs far more than the dozen small
    # gathers and scatters around it (a physics engine's reset). A native reset is a few hashes:
    # there the gathering costs more than it saves (`python -m benchmarks.compact_reset`).
    compact_reset: ClassVar[bool] = False
    # XLA:CPU compile options a program stepping this environment should use (a trainer's jit
    # reads them, e.g. agents'); the options a jaxlib does not know are for it to leave out.
    cpu_compiler_options: ClassVar[dict[str, Any]] = {}
    # Why the fused kernel cannot run this environment, when the class knows it statically.
    fused_refusal: ClassVar[str | None] = None

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
            self, (jnp.asarray(f, jnp.float32) for f in self.obs_fields(state, params))
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
        draw = ResetDraws.make(self, seed, jnp.asarray(index, jnp.uint32)).reset_draw(counter)
        state = self.init_state(draw, params)
        return state, self.observe(state, params)

    def reset_uniform_shapes(self) -> tuple[tuple[int, ...], ...]:
        """Each reset uniform's shape for one environment (`reset_shapes` resolved)."""
        if self.reset_shapes is None:
            return ((),) * self.num_reset_uniforms
        if len(self.reset_shapes) != self.num_reset_uniforms:
            raise TypeError(
                f"{type(self).__name__}: reset_shapes declares {len(self.reset_shapes)} shapes "
                f"for num_reset_uniforms={self.num_reset_uniforms} uniforms"
            )
        return tuple(params_lib.resolve_shape(s, self._config) for s in self.reset_shapes)

    def step_uniform_shapes(self) -> tuple[tuple[int, ...], ...]:
        """Each step uniform's shape for one environment (`step_shapes` resolved)."""
        if self.step_shapes is None:
            return ((),) * self.num_step_uniforms
        if len(self.step_shapes) != self.num_step_uniforms:
            raise TypeError(
                f"{type(self).__name__}: step_shapes declares {len(self.step_shapes)} shapes "
                f"for num_step_uniforms={self.num_step_uniforms} uniforms"
            )
        return tuple(params_lib.resolve_shape(s, self._config) for s in self.step_shapes)

    def reset_draw_shapes(self):
        """Shapes and dtypes of what `init_state` takes first, for one environment."""
        if self.reset_with_key:
            return jax.ShapeDtypeStruct((2,), jnp.uint32)
        return tuple(jax.ShapeDtypeStruct(s, jnp.float32) for s in self.reset_uniform_shapes())

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
        if self.num_step_uniforms:  # counter-based, as a rollout's, from a seed of `key`
            seed = rng.seed_from_key(rng.check_key(f"{self.id}.step", key))
            u = ResetDraws.make(self, seed, jnp.uint32(0)).step_draw(state.time + 1)
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
            draw = self.reset_draw_shapes()
            template = jax.eval_shape(self.init_state, draw, self.default_params)
            self._state_shapes = {
                jax.tree_util.keystr(path): leaf.shape
                for path, leaf in jax.tree.leaves_with_path(template)
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
