"""The vector half of the Gymnasium front: `JaxsimVectorEnv`, and the helpers both halves share.

`jaxsim.gymnasium` (registration, the single env, the SB3 factory) builds on this module; import
that one. Each `JaxsimVectorEnv.step` is one jitted call of `jaxsim.rollout.step.batch_step`, the
rollout's own transition, on the whole batch. Per call the host does only what Gymnasium's API
forces: validate and convert the actions, run one program, and copy one packed output buffer
(observations, rewards, flags) into fresh numpy arrays. The program takes three arrays (the
state, packed; the params and reset draws, packed; the actions) and gives two (the state and
the host buffer), whatever the number of the state's leaves: JAX's dispatch costs per array
(`jaxsim.gymnasium.programs.VectorPrograms`). It reads its params and reset draws without
returning them, and donates the state it replaces.
"""

from __future__ import annotations

import gymnasium  # jaxsim.gymnasium, which imports this module, names the extra if absent
import jax
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from jaxsim import params as params_lib
from jaxsim import spaces
from jaxsim.core import Env
from jaxsim.envs import ADAPTERS, REGISTRY, make
from jaxsim.gymnasium.programs import programs, signature
from jaxsim.params_sampling import check_sampler

NAMESPACE = "jaxsim"  # Gymnasium ids are "jaxsim/<id>"
_MAX_COUNT = 2**31 - 1


def gym_id(env_id: str) -> str:
    """The Gymnasium id of a jaxsim id: "CartPole-v1" -> "jaxsim/CartPole-v1", and an id with a
    slash (an adapter's "gymnax/Breakout-MinAtar", the native "MinAtar/Breakout-v0") has it made
    a dash: "jaxsim/gymnax-Breakout-MinAtar", "jaxsim/MinAtar-Breakout-v0" (Gymnasium allows one
    slash). A Gymnasium id is returned as is."""
    if env_id.startswith(f"{NAMESPACE}/"):
        return env_id
    prefix, slash, name = env_id.partition("/")
    return f"{NAMESPACE}/{prefix}-{name}" if slash else f"{NAMESPACE}/{env_id}"


def jaxsim_id(env_id: str) -> str:
    """The jaxsim id of a Gymnasium id (`gym_id`'s inverse); a jaxsim id is returned as is."""
    name = env_id.removeprefix(f"{NAMESPACE}/")
    prefix, dash, rest = name.partition("-")
    # Adapters' ids and native ids with a slash ("MinAtar/Breakout-v0") have it made a dash.
    if name not in REGISTRY and dash and (prefix in ADAPTERS or f"{prefix}/{rest}" in REGISTRY):
        return f"{prefix}/{rest}"
    return name


def gymnasium_space(space: spaces.Space) -> gymnasium.spaces.Space:
    """The Gymnasium space of a jaxsim space (one environment).

    Args:
      space: a `jaxsim.spaces.Discrete` or `Box`.

    Returns:
      `gymnasium.spaces.Discrete(n)` (int64, Gymnasium's default; jaxsim casts to int32) or a
      float32 `gymnasium.spaces.Box` with the same bounds and shape, except that a bound of
      float32's largest magnitude, which jaxsim's native environments write for "unbounded",
      is infinite, as Gymnasium's own spaces write it (CartPole's velocities: +-inf). A bool
      Box (MinAtar's grid) is `Box(0, 1, shape, bool)`, as the original's Gymnasium envs.
    """
    if isinstance(space, spaces.Discrete):
        return gymnasium.spaces.Discrete(space.n)
    if isinstance(space, spaces.Box) and space.dtype == np.bool_:
        return gymnasium.spaces.Box(space.low, space.high, space.shape, np.bool_)
    if isinstance(space, spaces.Box):
        low, high = _unbounded(space.low), _unbounded(space.high)
        return gymnasium.spaces.Box(low, high, space.shape, np.float32)
    raise TypeError(f"gymnasium_space: unsupported jaxsim space {space!r}")


def _unbounded(bound: np.ndarray) -> np.ndarray:
    """float32 bounds with +-float32 max made +-inf."""
    bound = np.asarray(bound, np.float32)
    edge = np.abs(bound) == np.finfo(np.float32).max
    return np.where(edge, np.copysign(np.inf, bound), bound).astype(np.float32)


def seed_words(np_random: np.random.Generator) -> np.ndarray:
    """Two uint32 words from Gymnasium's generator: a raw jax key, or a counter-hash seed."""
    return np_random.integers(0, 2**32, size=2, dtype=np.uint32)


def check_actions(owner: str, space: spaces.Space, actions, shape: tuple) -> np.ndarray:
    """`actions` as a numpy array of `space`'s dtype, or a ValueError naming what was wrong.

    jaxsim clips an out-of-range Discrete action; Gymnasium's environments reject it, and so
    does the front. The range check is two reductions, not a per-element comparison mask.
    """
    actions = np.asarray(actions)
    if actions.shape != shape:
        raise ValueError(f"{owner}: actions must have shape {shape}, got {actions.shape}")
    if isinstance(space, spaces.Discrete):
        if actions.dtype.kind not in "iu" or (
            actions.size and (actions.min() < 0 or actions.max() >= space.n)
        ):
            raise ValueError(
                f"{owner}: actions must be integers in [0, {space.n}), got {actions!r}"
            )
    return actions.astype(np.dtype(space.dtype), copy=False)


# ------------------------------------------------------------------------------------ the env
def _checked_params(owner: str, env: Env, params, num_envs: int):
    """`params` (default: `env.default_params`) with every leaf checked against its field.

    A leaf has its field's declared shape (shared) or a leading [num_envs] axis (one value per
    environment); a wrong shape or value is an error naming the field.
    """
    if params is None:
        return env.default_params
    if not isinstance(params, env.params_type):
        raise TypeError(
            f"{owner}: params must be {env.params_type.__name__} (env.default_params, or "
            f"jaxsim.uniform_params(...).sample(...)), got {type(params).__name__}"
        )
    env.params_axes(params, num_envs, owner=owner)  # a wrong shape names its field
    values = {}
    for spec in params_lib.specs(env.params_type):
        shape = spec.resolve_shape(env.config)
        value = getattr(params, spec.name)
        if np.shape(value) != shape:  # per environment: every value checked
            shape = (num_envs, *shape)
        values[spec.name] = spec.check(f"{owner}: params", jax.device_get(value), shape)
    return params.replace(**values)


class JaxsimVectorEnv(gymnasium.vector.VectorEnv):
    """`num_envs` copies of a jaxsim environment as a `gymnasium.vector.VectorEnv`.

    Each `step` is one jitted call of `jaxsim.rollout.step.batch_step` on the whole batch (vmapped
    lanes, as the scan rollout runs it). `autoreset_mode` is Gymnasium's:

    - `AutoresetMode.NEXT_STEP` (the default): a step that ends an episode returns its terminal
      observation; the next step returns the reset observation with reward 0 and both flags
      False, ignoring that lane's action.
    - `AutoresetMode.SAME_STEP`: the step that ends an episode returns the reset observation;
      `info["final_obs"]` (an object array, None for lanes that did not end) holds the terminal
      one, with masks `info["_final_obs"]`, `info["_final_info"]` as Gymnasium's vector envs.

    Domain randomisation: `params` holds leaves of their field's declared shape (shared) or
    with a leading [num_envs] axis (one value per environment), e.g. from
    `jaxsim.uniform_params(env, masspole=(0.05, 0.5)).sample(key, num_envs, env.default_params)`;
    `params_sampler` (e.g. that `jaxsim.uniform_params(...)`) draws its fields afresh for every
    episode at its reset, as `jaxsim.rollout(..., params_sampler=)` does.

    Every `reset` draws a new batch seed from `np_random` (seeded by `seed=`) and restarts the
    step counter; environment i's resets are then a pure function of that seed, i and the step
    count. `reset(options={"reset_mask": mask})` starts new episodes in the lanes where the bool
    [num_envs] `mask` is True and leaves the others' episodes running; masked lane i gets the
    same first observation as a full `reset` with the same seed would give it.
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int = 1,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
        params=None,
        params_sampler=None,
        **kwargs,
    ):
        owner = f"jaxsim/{env_id}"
        if isinstance(num_envs, bool) or not isinstance(num_envs, int | np.integer):
            raise TypeError(f"{owner}: num_envs must be an int, got {num_envs!r}")
        if not 1 <= num_envs <= _MAX_COUNT:
            raise ValueError(f"{owner}: num_envs must be in [1, 2**31 - 1], got {num_envs}")
        try:
            mode = AutoresetMode(autoreset_mode)
        except ValueError:
            mode = None
        if mode not in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP):
            raise ValueError(
                f"{owner}: autoreset_mode must be AutoresetMode.NEXT_STEP or SAME_STEP (or "
                f"'NextStep', 'SameStep'), got {autoreset_mode!r}"
            )
        if render_mode is not None:
            raise ValueError(f"{owner}: rendering is not supported, got {render_mode!r}")
        self.render_mode = None
        self.autoreset_mode = mode
        self.metadata = {"autoreset_mode": mode, "render_modes": []}
        self.num_envs = int(num_envs)
        self.jax_env = make(jaxsim_id(env_id), **kwargs)
        # On the device once: a Python scalar argument is converted again on every call.
        self.params = jax.device_put(_checked_params(owner, self.jax_env, params, self.num_envs))
        check_sampler(owner, self.jax_env, params_sampler, self.num_envs)
        self.params_sampler = params_sampler
        # Spaces come from the default params, as in jaxsim.rollout: params act on the physics.
        default = self.jax_env.default_params
        self._space = self.jax_env.action_space(default)
        self._action_shape = (self.num_envs, *self._space.shape)
        self.single_observation_space = gymnasium_space(self.jax_env.observation_space(default))
        self.single_action_space = gymnasium_space(self._space)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._programs = self._built_programs()
        # The state a step replaces and what it only reads, each one packed device buffer
        # (`jaxsim.gymnasium.programs.VectorPrograms`); None before the first reset.
        self._moving_words = self._fixed_words = None

    def _built_programs(self):
        same_step = self.autoreset_mode == AutoresetMode.SAME_STEP
        shapes = signature(self.params, self.params_sampler)
        return programs(self.jax_env, self.num_envs, same_step, shapes)

    @property
    def _moving(self):
        """The batch's `Moving` state as a pytree (None before the first reset)."""
        if self._moving_words is None:
            return None
        return self._programs.unpack_moving(self._moving_words)

    @property
    def _fixed(self):
        """The batch's `Fixed` inputs as a pytree (None before the first reset)."""
        if self._fixed_words is None:
            return None
        return self._programs.unpack_fixed(self._fixed_words)

    def __getstate__(self) -> dict:
        # The jitted programs are closures over the environment (not picklable); everything
        # else, the device state included, pickles, and the programs are rebuilt on load.
        state = dict(self.__dict__)
        del state["_programs"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._programs = self._built_programs()

    def _reset_mask(self, options: dict | None):
        """The bool [num_envs] reset mask of `options`, or None; a ValueError for anything else."""
        owner = f"jaxsim/{self.jax_env.id}"
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if options:
            raise ValueError(
                f"{owner}: unsupported reset options {sorted(options)}; the only option is "
                "'reset_mask' (a bool array of shape (num_envs,))"
            )
        if mask is None:
            return None
        got = np.asarray(mask)
        if got.dtype != np.bool_ or got.shape != (self.num_envs,):
            raise ValueError(
                f"{owner}: options['reset_mask'] must be a bool array of shape ({self.num_envs},)"
                f", got {got.dtype.name}{list(got.shape)}"
            )
        if not got.any():
            raise ValueError(f"{owner}: options['reset_mask'] selects no environment")
        if self._moving_words is None:
            raise gymnasium.error.ResetNeeded(
                f"{owner}: reset without a reset_mask first; a mask resets some lanes of a batch"
            )
        return got

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None and not isinstance(seed, int | np.integer):
            raise TypeError(
                f"jaxsim/{self.jax_env.id}: seed must be an int or None (environment i draws "
                f"its own counter-based resets from it), got {seed!r}"
            )
        mask = self._reset_mask(options)
        super().reset(seed=seed)
        seed, key = seed_words(self.np_random), seed_words(self.np_random)
        moving = None if mask is None else self._moving_words
        # params and params_sampler take effect at a reset (the step reads the reset's
        # `Fixed`); the programs follow their structure.
        built = self._built_programs()
        if mask is not None and built is not self._programs:
            raise ValueError(
                f"jaxsim/{self.jax_env.id}: params or params_sampler changed shape since the "
                "last reset; reset without a reset_mask first"
            )
        self._programs = built
        self._moving_words, self._fixed_words, obs = self._programs.reset(
            seed, key, self.params, self.params_sampler, moving, mask
        )
        return np.array(obs), {}

    def step(self, actions):
        if self._moving_words is None:
            raise gymnasium.error.ResetNeeded("jaxsim: call reset before step")
        owner = f"jaxsim/{self.jax_env.id}"
        actions = check_actions(owner, self._space, actions, self._action_shape)
        programs = self._programs
        self._moving_words, host = programs.step(self._moving_words, self._fixed_words, actions)
        # A read-only view of the one output buffer; each segment is copied out, so callers
        # (torch, SB3) may write to what they get.
        host = np.asarray(host)
        layout = programs.host
        obs, reward, terminated, truncated = layout.unpack(host)
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            return obs, reward, terminated, truncated, {}
        done = terminated | truncated
        if not done.any():
            return obs, reward, terminated, truncated, {}
        # Gymnasium's own SAME_STEP layout (SyncVectorEnv): per-lane objects, None elsewhere.
        final_obs = layout.obs_of(host, layout.final_obs)
        final = np.full(self.num_envs, None, dtype=object)
        for i in np.flatnonzero(done):
            final[i] = final_obs[i]
        info = {
            "final_obs": final,
            "_final_obs": done.copy(),
            "final_info": {},
            "_final_info": done.copy(),
        }
        return obs, reward, terminated, truncated, info


def sb3_vector_kwargs(env_id: str, kwargs: dict) -> dict:
    """`kwargs` for the SB3 VecEnv's `JaxsimVectorEnv`, without `autoreset_mode`, which SB3
    fixes to same-step; any other mode is a ValueError naming it."""
    kwargs = dict(kwargs)
    mode = kwargs.pop("autoreset_mode", AutoresetMode.SAME_STEP)
    try:
        same_step = AutoresetMode(mode) == AutoresetMode.SAME_STEP
    except ValueError:
        same_step = False
    if not same_step:
        raise ValueError(
            f"jaxsim/{env_id}: make_sb3_vec_env: SB3's VecEnv auto-resets in the same step, so "
            f"autoreset_mode must be AutoresetMode.SAME_STEP (or left out), got {mode!r}"
        )
    return kwargs
