"""Gymnasium interop: `import jaxsim.gymnasium` registers every native env as "jaxsim/<id>".

After the import, `gymnasium.make("jaxsim/CartPole-v1")` returns a single `gymnasium.Env` whose
`reset`/`step` are jaxsim's per-environment functions, jitted, and `gymnasium.make_vec(...,
vectorization_mode="vector_entry_point")` returns a `JaxsimVectorEnv` (see
`jaxsim.gymnasium_vector`) that steps every environment in one jitted call of
`jaxsim.transition.batch_step` (the rollout's own transition), in Gymnasium's NEXT_STEP or
SAME_STEP autoreset mode, with per-environment `params=`, a `params_sampler=` and
`reset(options={"reset_mask": mask})`. `make_sb3_vec_env` gives the same batched step as a
Stable-Baselines3 `VecEnv`. jaxsim truncates at `params.max_episode_steps`, so no Gymnasium
TimeLimit is stacked on top. Other keyword arguments of `make`/`make_vec` go to `jaxsim.make`
(params overrides and static config).

Adapter environments (gymnax, brax, MuJoCo Playground) take the same front under a
Gymnasium-valid id, their jaxsim id with the slash made a dash (Gymnasium allows one slash):
`register("gymnax/Breakout-MinAtar")` registers and returns "jaxsim/gymnax-Breakout-MinAtar"
without importing gymnax (the library is imported when the environment is made). `make(id)`
and `make_vec(id, num_envs)` register and make in one call; they take either spelling:

    venv = jaxsim.gymnasium.make_vec("gymnax/Breakout-MinAtar", num_envs=64)
    env = gymnasium.make(jaxsim.gymnasium.register("brax/ant"))  # after registering, plain ids

CPU dispatch: importing this module turns JAX's asynchronous CPU dispatch off
(`jax_cpu_enable_async_dispatch=False`) if JAX has not started its backends yet. The flag is
process-wide and read once, when the CPU client starts. A Gymnasium step runs one small program
and reads its result at once, so asynchronous dispatch buys no overlap and costs a thread
hand-off per step (`python -m benchmarks.gymnasium_front` measures both modes). It changes no
result, and only the CPU client: other jitted code still runs, but the Python thread waits for
each CPU computation instead of queueing the next. `cpu_dispatch()` says what was decided and
why. To keep asynchronous dispatch, call `jax.config.update("jax_cpu_enable_async_dispatch",
True)` after importing this module and before JAX's first computation, or run any JAX
computation before importing it (then it is left alone).
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

try:
    import gymnasium
except ImportError as e:  # an optional dependency: the `gymnasium` (alias `gym`) extra
    raise ImportError(
        "jaxsim.gymnasium needs Gymnasium 1.x: pip install 'jaxsim-rl[gymnasium]' "
        "(or pip install 'gymnasium>=1.0,<2')"
    ) from e

import jax
import numpy as np
from gymnasium.envs.registration import ENV_ID_RE

from jaxsim import envs
from jaxsim.core import Env
from jaxsim.gymnasium_vector import (
    NAMESPACE,
    JaxsimVectorEnv,
    check_actions,
    gym_id,
    gymnasium_space,
    jaxsim_id,
    seed_words,
)
from jaxsim.rendering import default_fps

__all__ = [
    "NAMESPACE",
    "JaxsimEnv",
    "JaxsimVectorEnv",
    "cpu_dispatch",
    "gym_id",
    "gymnasium_space",
    "jaxsim_id",
    "make",
    "make_sb3_vec_env",
    "make_vec",
    "register",
    "register_all",
]


# ----------------------------------------------------------------------------------- CPU dispatch
def _backends_started() -> bool:
    try:
        from jax._src.xla_bridge import backends_are_initialized
    except ImportError:  # a jax without it: assume started, and change nothing
        return True
    return backends_are_initialized()


_TURNED_OFF = "turned off by importing jaxsim.gymnasium"


def _choose_cpu_dispatch() -> str:
    """Turns JAX's asynchronous CPU dispatch off if JAX has not started its backends yet.

    `jax_cpu_enable_async_dispatch` is process-wide and read once, when the CPU client starts
    (JAX's first computation), so it is set here, on import, or never. Returns why the flag has
    its value, which `cpu_dispatch()` reports.
    """
    if not jax.config.read("jax_cpu_enable_async_dispatch"):
        return "off before jaxsim.gymnasium was imported"
    if _backends_started():
        return "left on: JAX had started before jaxsim.gymnasium was imported"
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    return _TURNED_OFF


_DISPATCH_REASON = _choose_cpu_dispatch()


def cpu_dispatch() -> dict[str, Any]:
    """Whether JAX dispatches CPU computations asynchronously in this process, and why.

    Returns:
      {"async": bool, "reason": str}. The front steps one small program per Gymnasium call and
      reads its result at once, so asynchronous dispatch only adds a thread hand-off per step;
      see the module docstring and `python -m benchmarks.gymnasium_front`.
    """
    on = bool(jax.config.read("jax_cpu_enable_async_dispatch"))
    reason = _DISPATCH_REASON
    if on and reason == _TURNED_OFF:
        reason = "turned on again after jaxsim.gymnasium was imported"
    return {"async": on, "reason": reason}


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
        self.jax_env = envs.make(jaxsim_id(env_id), **kwargs)
        if render_mode is not None and not self.jax_env.renderable:
            raise ValueError(
                f"jaxsim/{env_id}: render_mode={render_mode!r} refused: this environment cannot "
                "draw itself (no Env.draw); make it with render_mode=None"
            )
        modes = ["rgb_array"] if self.jax_env.renderable else []
        self.metadata = {"render_modes": modes, "render_fps": default_fps(self.jax_env)}
        self.params = self.jax_env.default_params
        self._space = self.jax_env.action_space(self.params)
        self.observation_space = gymnasium_space(self.jax_env.observation_space(self.params))
        self.action_space = gymnasium_space(self._space)
        self._state = None
        self._key = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        # One key for the reset, one that the steps split (it reaches stochastic dynamics).
        self._key = seed_words(self.np_random)
        self._state, obs = _reset_one(self.jax_env, seed_words(self.np_random), self.params)
        return np.array(obs), {}

    def step(self, action):
        if self._state is None:
            raise gymnasium.error.ResetNeeded("jaxsim: call reset before step")
        owner = f"jaxsim/{self.jax_env.id}"
        action = check_actions(owner, self._space, action, self._space.shape)
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


# ------------------------------------------------------------------------------ SB3 and registry
def make_sb3_vec_env(env_id: str, num_envs: int = 1, **kwargs):
    """A Stable-Baselines3 `VecEnv` stepping `num_envs` copies of a jaxsim env in one jitted call.

    Args:
      env_id: a jaxsim id ("CartPole-v1") or its Gymnasium id ("jaxsim/CartPole-v1").
      num_envs: the batch size.
      **kwargs: `params=` (leaves shared or [num_envs]) and `params_sampler=`, as for
        `JaxsimVectorEnv`, and `jaxsim.make` arguments (params overrides and static config).

    Returns:
      A `jaxsim.sb3.JaxsimSB3VecEnv` with SB3's semantics: same-step auto-reset, the terminal
      observation in `infos[i]["terminal_observation"]` and `infos[i]["TimeLimit.truncated"]`.

    Raises:
      ImportError: naming what to install, if stable_baselines3 is missing.
    """
    from jaxsim.sb3 import JaxsimSB3VecEnv  # deferred: it imports stable_baselines3 and torch

    return JaxsimSB3VecEnv(env_id, num_envs, **kwargs)


def register(env_id: str) -> str:
    """Registers one jaxsim id (native or adapter) in Gymnasium, without importing its library.

    Args:
      env_id: a jaxsim id ("CartPole-v1", "gymnax/Breakout-MinAtar", "brax/ant") or its
        Gymnasium id ("jaxsim/gymnax-Breakout-MinAtar").

    Returns:
      The Gymnasium id, for `gymnasium.make` and `gymnasium.make_vec(...,
      vectorization_mode="vector_entry_point")`. The adapter's library is imported when the
      environment is made (a missing one raises an ImportError naming the extra to install).

    Raises:
      ValueError: for an id that is neither native nor "<adapter prefix>/<name>".
    """
    if not isinstance(env_id, str):
        raise TypeError(f"jaxsim.gymnasium.register: env_id must be a str, got {env_id!r}")
    native = jaxsim_id(env_id)
    prefix, slash, name = native.partition("/")
    known = native in envs.REGISTRY or (slash and prefix in envs.ADAPTERS and name)
    gym_name = gym_id(native)
    if not known or "/" in name or not ENV_ID_RE.fullmatch(gym_name):
        raise ValueError(
            f"jaxsim.gymnasium.register: unknown environment id {env_id!r}; native ids are "
            f"{envs.registered_ids()}, adapters take {[f'{p}/<name>' for p in envs.ADAPTERS]}"
        )
    if gym_name not in gymnasium.registry:
        gymnasium.register(
            id=gym_name,
            entry_point=f"{__name__}:JaxsimEnv",
            vector_entry_point=f"{__name__}:JaxsimVectorEnv",
            # jaxsim's own params.max_episode_steps truncates: a TimeLimit would truncate twice.
            max_episode_steps=None,
            kwargs={"env_id": native},
        )
    return gym_name


def make(env_id: str, **kwargs) -> gymnasium.Env:
    """`gymnasium.make` of any jaxsim id (adapters included), registering it first.

    `kwargs` go to `gymnasium.make` and on to `jaxsim.make` (params overrides, static config).
    """
    return gymnasium.make(register(env_id), **kwargs)


def make_vec(env_id: str, num_envs: int = 1, **kwargs) -> JaxsimVectorEnv:
    """`num_envs` copies of any jaxsim id (adapters included) as a `JaxsimVectorEnv`, through
    `gymnasium.make_vec(..., vectorization_mode="vector_entry_point")`.

    `kwargs`: the vector env's (`autoreset_mode`, `params`, `params_sampler`) and `jaxsim.make`
    arguments.
    """
    return gymnasium.make_vec(
        register(env_id), num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs
    )


def register_all() -> list[str]:
    """Registers every native jaxsim id in Gymnasium as "jaxsim/<id>" (done once, on import).

    Adapter ids are registered one by one (`register`): their libraries list their own.

    Returns:
      The Gymnasium ids registered.
    """
    return [register(env_id) for env_id in envs.registered_ids()]


register_all()
