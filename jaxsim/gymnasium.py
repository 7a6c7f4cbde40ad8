"""Gymnasium interop: `import jaxsim.gymnasium` registers every native env as "jaxsim/<id>".

After the import, `gymnasium.make("jaxsim/CartPole-v1")` returns a single `gymnasium.Env` whose
`reset`/`step` are jaxsim's per-environment functions, jitted, and `gymnasium.make_vec(...,
vectorization_mode="vector_entry_point")` returns a `gymnasium.vector.VectorEnv` that steps every
environment in one jitted call of `jaxsim.transition.batch_step` (the rollout's own transition),
in Gymnasium's NEXT_STEP or SAME_STEP autoreset mode. `make_sb3_vec_env` gives the same batched
step as a Stable-Baselines3 `VecEnv`. jaxsim truncates at `params.max_episode_steps`, so no
Gymnasium TimeLimit is stacked on top. Keyword arguments of `make`/`make_vec` go to
`jaxsim.make` (params overrides and static config).
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

try:
    import gymnasium
except ImportError as e:  # an optional dependency: the `gym` (or `test`) extra
    raise ImportError(
        "jaxsim.gymnasium needs Gymnasium 1.x: pip install 'jaxsim-rl[gym]' "
        "(or pip install 'gymnasium>=1.0,<2')"
    ) from e

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from jaxsim import spaces
from jaxsim.core import Env
from jaxsim.envs import make, registered_ids
from jaxsim.rendering import default_fps
from jaxsim.transition import (
    Carry,
    Lanes,
    ResetDraws,
    batch_step,
    initial_carry,
    stack_obs,
    with_episode_params,
)

__all__ = [
    "NAMESPACE",
    "JaxsimEnv",
    "JaxsimVectorEnv",
    "gymnasium_space",
    "make_sb3_vec_env",
    "register_all",
]

NAMESPACE = "jaxsim"
_MAX_COUNT = 2**31 - 1


def gymnasium_space(space: spaces.Space) -> gymnasium.spaces.Space:
    """The Gymnasium space of a jaxsim space (one environment).

    Args:
      space: a `jaxsim.spaces.Discrete` or `Box`.

    Returns:
      `gymnasium.spaces.Discrete(n)` (int64, Gymnasium's default; jaxsim casts to int32) or a
      float32 `gymnasium.spaces.Box` with the same bounds and shape.
    """
    if isinstance(space, spaces.Discrete):
        return gymnasium.spaces.Discrete(space.n)
    if isinstance(space, spaces.Box):
        return gymnasium.spaces.Box(space.low, space.high, space.shape, np.float32)
    raise TypeError(f"gymnasium_space: unsupported jaxsim space {space!r}")


def _seed_words(np_random: np.random.Generator) -> np.ndarray:
    """Two uint32 words from Gymnasium's generator: a raw jax key, or a counter-hash seed."""
    return np_random.integers(0, 2**32, size=2, dtype=np.uint32)


def _check_discrete(owner: str, space: spaces.Space, action: np.ndarray) -> None:
    # jaxsim clips an out-of-range Discrete action; Gymnasium's environments reject it.
    if not isinstance(space, spaces.Discrete):
        return
    if not np.issubdtype(action.dtype, np.integer) or np.any((action < 0) | (action >= space.n)):
        raise ValueError(f"{owner}: actions must be integers in [0, {space.n}), got {action!r}")


# ------------------------------------------------------------------------------------- single env
@functools.partial(jax.jit, static_argnums=0)
def _reset_one(env: Env, key, params):
    state, obs = env.reset(key, params)
    return state, obs


@functools.partial(jax.jit, static_argnums=0)
def _step_one(env: Env, key, state, action, params):
    key, step_key = jax.random.split(key)
    state, ts = env.step(step_key, state, action, params)
    return key, state, (ts.obs, ts.reward, ts.terminated, ts.truncated)


class JaxsimEnv(gymnasium.Env):
    """One jaxsim environment as a `gymnasium.Env` (numpy in and out).

    `reset(seed=s)` seeds Gymnasium's `np_random`, from which each reset draws the jaxsim key, so
    the same seed gives the same episode and `reset()` continues the stream. Truncation comes
    from jaxsim (`params.max_episode_steps`); the registered ids add no TimeLimit.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"]}

    def __init__(self, env_id: str, render_mode: str | None = None, **kwargs):
        if render_mode not in (None, "rgb_array"):
            raise ValueError(
                f"jaxsim/{env_id}: render_mode must be None or 'rgb_array', got {render_mode!r}"
            )
        self.render_mode = render_mode
        self.jax_env = make(env_id, **kwargs)
        self.metadata = {**self.metadata, "render_fps": default_fps(self.jax_env)}
        self.params = self.jax_env.default_params
        self._space = self.jax_env.action_space(self.params)
        self.observation_space = gymnasium_space(self.jax_env.observation_space(self.params))
        self.action_space = gymnasium_space(self._space)
        self._state = None
        self._key = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        # One key for the reset, one that the steps split (it reaches stochastic dynamics).
        self._key = _seed_words(self.np_random)
        self._state, obs = _reset_one(self.jax_env, _seed_words(self.np_random), self.params)
        return np.array(obs), {}

    def step(self, action):
        if self._state is None:
            raise gymnasium.error.ResetNeeded("jaxsim: call reset before step")
        action = np.asarray(action)
        _check_discrete(f"jaxsim/{self.jax_env.id}", self._space, action)
        action = action.astype(np.dtype(self._space.dtype))
        self._key, self._state, out = _step_one(
            self.jax_env, self._key, self._state, action, self.params
        )
        obs, reward, terminated, truncated = jax.device_get(out)
        return np.array(obs), float(reward), bool(terminated), bool(truncated), {}

    def render(self):
        """The current state as an RGB uint8 array (`env.render`), with render_mode="rgb_array"."""
        if self.render_mode is None or self._state is None:
            return None
        return self.jax_env.render(self._state, self.params)


# ------------------------------------------------------------------------------------- vector env
@struct.dataclass
class _VectorState:
    """A vector env between calls; leaves are [num_envs] unless noted."""

    carry: Carry  # after same-step auto-reset, as batch_step leaves it
    obs: jax.Array  # observation of carry.env_state: [num_envs, *obs_shape]
    pending: jax.Array  # bool: NEXT_STEP: the last step ended the episode, reset not yet shown
    draws: ResetDraws
    counter: jax.Array  # uint32 scalar: steps since reset, the counter of the reset draws
    key: jax.Array  # raw uint32[2] key for stochastic dynamics


def _observe(env, carry: Carry, params, params_axes) -> jax.Array:
    step_params, step_axes = with_episode_params(params, params_axes, carry.episode_params)
    return stack_obs(env, Lanes(vmapped=True).observe(env, carry.env_state, step_params, step_axes))


def _where_lanes(mask, a, b):
    """Leafwise `where(mask, a, b)` over pytrees whose leaves have leading [num_envs]."""

    def one(x, y):
        return jnp.where(mask.reshape(mask.shape + (1,) * (jnp.ndim(x) - 1)), x, y)

    return jax.tree.map(one, a, b)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _vector_reset(env: Env, num_envs: int, seed, key, params):
    params_axes = env.params_axes(params, num_envs, owner="jaxsim.gymnasium")
    draws = ResetDraws.make(env, seed, jnp.arange(num_envs, dtype=jnp.uint32))
    carry = initial_carry(env, Lanes(vmapped=True), params, params_axes, draws, False, False)
    obs = _observe(env, carry, params, params_axes)
    pending = jnp.zeros((num_envs,), jnp.bool_)
    return _VectorState(carry, obs, pending, draws, jnp.uint32(0), key)


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _vector_step(env: Env, num_envs: int, same_step: bool, vstate: _VectorState, action, params):
    params_axes = env.params_axes(params, num_envs, owner="jaxsim.gymnasium")
    counter = vstate.counter + jnp.uint32(1)
    keys = None
    if env.stochastic:
        keys = jax.random.split(jax.random.fold_in(vstate.key, counter), num_envs)
    carry, rec = batch_step(
        env, Lanes(vmapped=True), vstate.carry, action, params, params_axes, counter, vstate.draws,
        keys,
    )  # fmt: skip
    next_obs = stack_obs(env, rec["next_obs"])  # before the auto-reset
    obs = _observe(env, carry, params, params_axes)  # after it
    reward, terminated, truncated = rec["reward"], rec["terminated"], rec["truncated"]
    if same_step:
        out = (obs, reward, terminated, truncated, next_obs)
        return vstate.replace(carry=carry, obs=obs, counter=counter), out
    # NEXT_STEP: a lane whose last step ended shows the reset it already holds, with reward 0 and
    # no flags, and does not advance; every other lane shows this step's true observation.
    pending = vstate.pending
    carry = _where_lanes(pending, vstate.carry, carry)
    obs = jnp.where(pending[:, None], vstate.obs, obs)
    shown = jnp.where(pending[:, None], vstate.obs, next_obs)
    reward = jnp.where(pending, jnp.float32(0), reward)
    terminated = terminated & ~pending
    truncated = truncated & ~pending
    new = vstate.replace(carry=carry, obs=obs, pending=terminated | truncated, counter=counter)
    return new, (shown, reward, terminated, truncated, next_obs)


class JaxsimVectorEnv(gymnasium.vector.VectorEnv):
    """`num_envs` copies of a jaxsim environment as a `gymnasium.vector.VectorEnv`.

    Each `step` is one jitted call of `jaxsim.transition.batch_step` on the whole batch (vmapped
    lanes, as the scan rollout runs it). `autoreset_mode` is Gymnasium's:

    - `AutoresetMode.NEXT_STEP` (the default): a step that ends an episode returns its terminal
      observation; the next step returns the reset observation with reward 0 and both flags
      False, ignoring that lane's action.
    - `AutoresetMode.SAME_STEP`: the step that ends an episode returns the reset observation;
      `info["final_obs"]` (an object array, None for lanes that did not end) holds the terminal
      one, with masks `info["_final_obs"]`, `info["_final_info"]` as Gymnasium's vector envs.

    `reset(seed=s)` seeds `np_random`, from which the batch's counter-based reset seed is drawn;
    environment i's resets are then a pure function of that seed, i and the step count.
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int = 1,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
        **kwargs,
    ):
        if isinstance(num_envs, bool) or not isinstance(num_envs, int | np.integer):
            raise TypeError(f"jaxsim/{env_id}: num_envs must be an int, got {num_envs!r}")
        if not 1 <= num_envs <= _MAX_COUNT:
            raise ValueError(f"jaxsim/{env_id}: num_envs must be in [1, 2**31 - 1], got {num_envs}")
        mode = AutoresetMode(autoreset_mode)
        if mode not in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP):
            raise ValueError(
                f"jaxsim/{env_id}: autoreset_mode must be NEXT_STEP or SAME_STEP, got {mode}"
            )
        if render_mode is not None:
            raise ValueError(f"jaxsim/{env_id}: rendering is not supported, got {render_mode!r}")
        self.render_mode = None
        self.autoreset_mode = mode
        self.metadata = {"autoreset_mode": mode, "render_modes": []}
        self.num_envs = int(num_envs)
        self.jax_env = make(env_id, **kwargs)
        self.params = self.jax_env.default_params
        self._space = self.jax_env.action_space(self.params)
        self.single_observation_space = gymnasium_space(self.jax_env.observation_space(self.params))
        self.single_action_space = gymnasium_space(self._space)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._vstate = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None and not isinstance(seed, int | np.integer):
            raise TypeError(
                f"jaxsim/{self.jax_env.id}: seed must be an int or None (environment i draws "
                f"its own counter-based resets from it), got {seed!r}"
            )
        if options:
            raise ValueError(f"jaxsim/{self.jax_env.id}: reset options are not supported")
        super().reset(seed=seed)
        seed_words, key = _seed_words(self.np_random), _seed_words(self.np_random)
        self._vstate = _vector_reset(self.jax_env, self.num_envs, seed_words, key, self.params)
        return np.array(self._vstate.obs), {}

    def step(self, actions):
        if self._vstate is None:
            raise gymnasium.error.ResetNeeded("jaxsim: call reset before step")
        actions = np.asarray(actions)
        owner = f"jaxsim/{self.jax_env.id}"
        expected = (self.num_envs, *self._space.shape)
        if actions.shape != expected:
            raise ValueError(f"{owner}: actions must have shape {expected}, got {actions.shape}")
        _check_discrete(owner, self._space, actions)
        actions = actions.astype(np.dtype(self._space.dtype))
        same_step = self.autoreset_mode == AutoresetMode.SAME_STEP
        self._vstate, out = _vector_step(
            self.jax_env, self.num_envs, same_step, self._vstate, actions, self.params
        )
        # Copies: device_get may give read-only views, and callers (torch) write to them.
        obs, reward, terminated, truncated, final_obs = map(np.array, jax.device_get(out))
        infos: dict[str, Any] = {}
        done = terminated | truncated
        if same_step and done.any():
            # Gymnasium's own SAME_STEP layout (SyncVectorEnv): per-lane objects, None elsewhere.
            final = np.full(self.num_envs, None, dtype=object)
            for i in np.flatnonzero(done):
                final[i] = final_obs[i]
            infos = {
                "final_obs": final,
                "_final_obs": done.copy(),
                "final_info": {},
                "_final_info": done.copy(),
            }
        return obs, reward, terminated, truncated, infos


# ------------------------------------------------------------------------------ SB3 and registry
def make_sb3_vec_env(env_id: str, num_envs: int = 1, **kwargs):
    """A Stable-Baselines3 `VecEnv` stepping `num_envs` copies of a jaxsim env in one jitted call.

    Args:
      env_id: a jaxsim id ("CartPole-v1") or its Gymnasium id ("jaxsim/CartPole-v1").
      num_envs: the batch size.
      **kwargs: `jaxsim.make` arguments (params overrides and static config).

    Returns:
      A `jaxsim.sb3.JaxsimSB3VecEnv` with SB3's semantics: same-step auto-reset, the terminal
      observation in `infos[i]["terminal_observation"]` and `infos[i]["TimeLimit.truncated"]`.

    Raises:
      ImportError: naming what to install, if stable_baselines3 is missing.
    """
    from jaxsim.sb3 import JaxsimSB3VecEnv  # deferred: it imports stable_baselines3 and torch

    return JaxsimSB3VecEnv(env_id, num_envs, **kwargs)


def register_all() -> list[str]:
    """Registers every jaxsim id in Gymnasium as "jaxsim/<id>" (done once, on import).

    Returns:
      The Gymnasium ids registered.
    """
    ids = []
    for env_id in registered_ids():
        gym_id = f"{NAMESPACE}/{env_id}"
        if gym_id not in gymnasium.registry:
            gymnasium.register(
                id=gym_id,
                entry_point=f"{__name__}:JaxsimEnv",
                vector_entry_point=f"{__name__}:JaxsimVectorEnv",
                # jaxsim's own params.max_episode_steps truncates: a TimeLimit would truncate twice.
                max_episode_steps=None,
                kwargs={"env_id": env_id},
            )
        ids.append(gym_id)
    return ids


register_all()
