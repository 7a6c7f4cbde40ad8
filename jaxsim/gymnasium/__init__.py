"""Gymnasium interop: `import jaxsim.gymnasium` registers every native env as "jaxsim/<id>".

After the import, `gymnasium.make("jaxsim/CartPole-v1")` returns a single `gymnasium.Env` whose
`reset`/`step` are jaxsim's per-environment functions, jitted (one call and one host buffer per
step: `jaxsim.gymnasium.step`), and `gymnasium.make_vec(...,
vectorization_mode="vector_entry_point")` returns a `JaxsimVectorEnv` (see
`jaxsim.gymnasium.vector`) that steps every environment in one jitted call of
`jaxsim.rollout.step.batch_step` (the rollout's own transition), in Gymnasium's NEXT_STEP or
SAME_STEP autoreset mode, with per-environment `params=`, a `params_sampler=` and
`reset(options={"reset_mask": mask})`. `make_sb3_vec_env` gives the same batched step as a
Stable-Baselines3 `VecEnv`. One time limit truncates: a native id registers jaxsim's default
limit as its `max_episode_steps`, and the env `gymnasium.make` builds lifts jaxsim's own, so
Gymnasium's TimeLimit (with make's `max_episode_steps=`, if given) is the one (see `register`);
the vector env sets jaxsim's. Other keyword arguments of `make`/`make_vec` go to `jaxsim.make`
(params overrides and static config).

Adapter environments (gymnax, brax, MuJoCo Playground) take the same front under a
Gymnasium-valid id, their jaxsim id with the slash made a dash (Gymnasium allows one slash):
`register("gymnax/Breakout-MinAtar")` registers and returns "jaxsim/gymnax-Breakout-MinAtar"
without importing gymnax (the library is imported when the environment is made). `make(id)`
and `make_vec(id, num_envs)` register and make in one call; they take either spelling:

    venv = jaxsim.gymnasium.make_vec("gymnax/Breakout-MinAtar", num_envs=64)
    env = gymnasium.make(jaxsim.gymnasium.register("brax/ant"))  # after registering, plain ids

CPU dispatch: importing this module changes no JAX setting. A Gymnasium step runs one small
program and reads its result at once, so JAX's asynchronous CPU dispatch buys it no overlap and
costs a thread hand-off per step (`python -m benchmarks.front.measure` measures both modes);
the opt-in `cpu_dispatch(sync=True)`, called before JAX's first computation, turns it off. The
flag (`jax_cpu_enable_async_dispatch`) is process-wide and read once, when JAX's CPU client
starts, so it cannot be scoped to the front's own calls: every other CPU computation in the
process then runs synchronously too (no result changes; the Python thread waits for each
computation instead of queueing the next). `cpu_dispatch()` says what is in force and why.

CPU threads: `set_cpu_threads(1)` (from `jaxsim.cpu_threads`, opt-in, process-wide, before JAX's
first computation) runs XLA's CPU programs on one thread, which spares each vector step its
hand-offs to XLA's other threads (see `jaxsim.cpu_threads`).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, ClassVar

try:
    import gymnasium

    # Gymnasium 1.1 brought the vector AutoresetMode; an older one (0.29, 1.0) lacks the name.
    from gymnasium.vector import AutoresetMode  # noqa: F401 (the version check)
except ImportError as e:  # an optional dependency: the `gymnasium` (alias `gym`) extra
    _found = getattr(sys.modules.get("gymnasium"), "__version__", None)
    raise ImportError(
        "jaxsim.gymnasium needs Gymnasium >= 1.1, < 2 (1.1 added the vector AutoresetMode), "
        f"found {'none' if _found is None else _found}: pip install 'jaxsim-rl[gymnasium]' "
        "(or pip install 'gymnasium>=1.1,<2')"
    ) from e

import jax
import numpy as np
from gymnasium.envs.registration import ENV_ID_RE

from jaxsim import envs
from jaxsim.cpu_threads import _backends_started, set_cpu_threads
from jaxsim.gymnasium import step as gymnasium_step
from jaxsim.gymnasium.vector import (
    NAMESPACE,
    JaxsimVectorEnv,
    check_actions,
    gym_id,
    gymnasium_space,
    jaxsim_id,
    sb3_vector_kwargs,
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
    "set_cpu_threads",
]


# ------------------------------------------------------------------------------------ CPU dispatch
_ASYNC_FLAG = "jax_cpu_enable_async_dispatch"
_dispatch_set: dict[str, Any] = {}  # what cpu_dispatch(sync=...) set: {"async", "reason"}


def cpu_dispatch(sync: bool | None = None) -> dict[str, Any]:
    """Whether JAX dispatches CPU computations asynchronously in this process, and why; with
    `sync`, sets it first (opt-in: importing this module changes nothing).

    A Gymnasium step runs one small program and reads its result at once, so asynchronous
    dispatch only adds a thread hand-off per step (`python -m benchmarks.front.measure`).
    The flag is process-wide: `sync=True` makes every CPU computation of the process wait for
    its result (the same results, no queueing), not only the front's.

    Args:
      sync: True turns asynchronous CPU dispatch off, False turns it on, None (the default)
        only reports. JAX reads the flag once, when its CPU client starts (the first
        computation): a change asked for after that is a RuntimeError.

    Returns:
      {"async": bool, "reason": str}.
    """
    if sync not in (None, True, False):
        raise TypeError(f"cpu_dispatch: sync must be True, False or None, got {sync!r}")
    on = bool(jax.config.read(_ASYNC_FLAG))
    if sync is not None:
        if on == sync and _backends_started():
            raise RuntimeError(
                f"cpu_dispatch(sync={sync}): JAX has started its CPU client, which read "
                f"{_ASYNC_FLAG}={on} once; call it before JAX's first computation"
            )
        jax.config.update(_ASYNC_FLAG, not sync)
        on = not sync
        _dispatch_set.update({"async": on, "reason": f"set by cpu_dispatch(sync={sync})"})
    if not _dispatch_set:
        reason = "JAX's setting: jaxsim.gymnasium changes it only through cpu_dispatch(sync=...)"
    elif _dispatch_set["async"] != on:
        reason = f"changed with jax.config.update after {_dispatch_set['reason']}"
    else:
        reason = _dispatch_set["reason"]
    return {"async": on, "reason": reason}


# ------------------------------------------------------------------------------------- single env
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
        self._words = None  # the device buffer of gymnasium_step: key, state, params, outputs

    @property
    def params(self):
        """The params every step reads; setting them takes effect from the next step."""
        return self._params

    @params.setter
    def params(self, params) -> None:
        owner = f"jaxsim/{self.jax_env.id}"
        self.jax_env.check_params(params)
        programs = gymnasium_step.programs(self.jax_env)
        packed = jax.device_put(programs.params_layout.pack_host(f"{owner}: params", params))
        self._params, self._params_words, self._programs = params, packed, programs
        if getattr(self, "_words", None) is not None:  # a running episode reads them too
            self._words = programs.with_params(self._words, packed)

    @property
    def _state(self):
        """The environment's jaxsim state (None before the first reset)."""
        if self._words is None:
            return None
        return self._programs.unpack(self._words)[2]

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if options:  # jaxsim's resets take no options: refused rather than silently dropped
            raise ValueError(
                f"jaxsim/{self.jax_env.id}: reset takes no options, got {sorted(options)}"
            )
        super().reset(seed=seed)
        # Two seed_words draws in one: the key the steps split (it reaches stochastic
        # dynamics), then the reset's.
        keys = self.np_random.integers(0, 2**32, size=4, dtype=np.uint32)
        self._words = self._programs.reset(keys, self._params_words)
        return self._programs.outputs(self._words)[0], {}

    def step(self, action):
        if self._words is None:
            raise gymnasium.error.ResetNeeded("jaxsim: call reset before step")
        # One compiled call and one host view per step (see jaxsim.gymnasium.step). An int
        # action of a Discrete space is its own range check: a lookup in the device table.
        programs = self._programs
        device_action = None
        if type(action) is int or isinstance(action, np.integer):
            device_action = programs.table.get(action)
        if device_action is None:  # any other action, or a bad one: checked, then converted
            owner = f"jaxsim/{self.jax_env.id}"
            checked = check_actions(owner, self._space, action, programs.action_shape)
            device_action = programs.device_action(checked)
        self._words = programs.step(self._words, device_action)
        return *programs.outputs(self._words), {}

    def render(self):
        """The current state as an RGB uint8 array (`env.render`), with render_mode="rgb_array"."""
        if self.render_mode is None or self._state is None:
            return None
        return self.jax_env.render(self._state, self.params)


# The largest limit jaxsim's params accept: no episode of any Gymnasium run reaches it.
_NO_LIMIT = 2**31 - 1


class _TimeLimitedEnv(JaxsimEnv):
    """The entry point of the native "jaxsim/<id>" ids: Gymnasium's TimeLimit truncates.

    `gymnasium.make` keeps its `max_episode_steps=` for the TimeLimit it applies (the registered
    limit, jaxsim's default, when none is given) and never passes it to the environment. So
    this environment lifts jaxsim's own limit out of the way and the TimeLimit is the only one,
    as for Gymnasium's own ids: any N, above or below the default, truncates at N, and
    `max_episode_steps=-1` (no TimeLimit) runs without one.
    """

    def __init__(self, env_id: str, render_mode: str | None = None, **kwargs):
        if "max_episode_steps" in kwargs:  # only a hand-made spec gets here: it would be lost
            raise TypeError(
                f"jaxsim/{env_id}: give max_episode_steps to gymnasium.make (its TimeLimit "
                f"truncates), not in the spec's kwargs; got {kwargs['max_episode_steps']!r}"
            )
        super().__init__(env_id, render_mode, **kwargs, max_episode_steps=_NO_LIMIT)


# ------------------------------------------------------------------------------ SB3 and registry
def make_sb3_vec_env(env_id: str, num_envs: int = 1, **kwargs):
    """A Stable-Baselines3 `VecEnv` stepping `num_envs` copies of a jaxsim env in one jitted call.

    Args:
      env_id: a jaxsim id ("CartPole-v1") or its Gymnasium id ("jaxsim/CartPole-v1").
      num_envs: the batch size.
      **kwargs: `params=` (leaves shared or [num_envs]) and `params_sampler=`, as for
        `JaxsimVectorEnv`, and `jaxsim.make` arguments (params overrides and static config).

    Returns:
      A `jaxsim.gymnasium.sb3.JaxsimSB3VecEnv` with SB3's semantics: same-step auto-reset, the
      terminal observation in `infos[i]["terminal_observation"]` and
      `infos[i]["TimeLimit.truncated"]`.

    Raises:
      ValueError: for an `autoreset_mode` other than SAME_STEP (SB3's own semantics).
      ImportError: naming what to install, if stable_baselines3 is missing.
    """
    kwargs = sb3_vector_kwargs(env_id, kwargs)  # before the (slow) import of SB3 and torch
    # Deferred: it imports stable_baselines3 and torch.
    from jaxsim.gymnasium.sb3 import JaxsimSB3VecEnv

    return JaxsimSB3VecEnv(env_id, num_envs, **kwargs)


def register(env_id: str) -> str:
    """Registers one jaxsim id (native or adapter) in Gymnasium, without importing its library.

    A native id's spec gives jaxsim's default limit as `max_episode_steps` (Gymnasium's for the
    ids Gymnasium has) and Gymnasium's `reward_threshold`: `gymnasium.make` applies a TimeLimit
    with it, the only limit (see `_TimeLimitedEnv`). An adapter's default limit is known only
    once its library is imported: its spec has none, and jaxsim truncates at the adapter's own
    `max_episode_steps` (another one: `make(id, max_episode_steps=N)` of this module).

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
    if gym_name in gymnasium.registry:
        return gym_name
    if native in envs.REGISTRY:
        limit = int(envs.build(native).default_params.max_episode_steps)
        theirs = gymnasium.registry.get(native)  # Gymnasium's own id of that name, if any
        gymnasium.register(
            id=gym_name,
            entry_point=f"{__name__}:_TimeLimitedEnv",
            vector_entry_point=f"{__name__}:JaxsimVectorEnv",
            max_episode_steps=None if limit >= _NO_LIMIT else limit,  # MinAtar: no limit
            reward_threshold=None if theirs is None else theirs.reward_threshold,
            kwargs={"env_id": native},
        )
    else:
        gymnasium.register(
            id=gym_name,
            entry_point=f"{__name__}:JaxsimEnv",
            vector_entry_point=f"{__name__}:JaxsimVectorEnv",
            max_episode_steps=None,  # jaxsim's limit truncates: a TimeLimit would be a second
            kwargs={"env_id": native},
        )
    return gym_name


def _made_or_unregistered(env_id: str, make_fn):
    """`make_fn(gym_name)` after registering `env_id`; an id registered here for it and whose
    make fails is taken out of Gymnasium's registry again (a bogus adapter name stays out)."""
    new = isinstance(env_id, str) and gym_id(jaxsim_id(env_id)) not in gymnasium.registry
    gym_name = register(env_id)  # a TypeError for a non-str id
    try:
        return make_fn(gym_name)
    except BaseException:
        if new:
            gymnasium.registry.pop(gym_name, None)
        raise


def make(env_id: str, **kwargs) -> gymnasium.Env:
    """`gymnasium.make` of any jaxsim id (adapters included), registering it first.

    `kwargs` go to `gymnasium.make` and on to `jaxsim.make` (params overrides, static config).
    `max_episode_steps=N` truncates at N, above or below the default: through Gymnasium's
    TimeLimit for a native id (as `gymnasium.make` does), through jaxsim's own limit for an
    adapter id, whose registered spec has none.
    """
    limit = kwargs.pop("max_episode_steps", None)
    if limit is not None and (
        isinstance(limit, bool)
        or not isinstance(limit, int | np.integer)
        or not (limit == -1 or 1 <= limit <= _NO_LIMIT)
    ):
        raise ValueError(
            f"jaxsim.gymnasium.make: max_episode_steps must be an int in [1, 2**31 - 1] (or -1: "
            f"no limit, or None: the default), got {limit!r}"
        )

    def make_one(gym_name):
        spec = gymnasium.spec(gym_name)
        if limit is None or spec.entry_point == f"{__name__}:_TimeLimitedEnv":
            return gymnasium.make(gym_name, max_episode_steps=limit, **kwargs)
        # An adapter id: gymnasium.make never hands its max_episode_steps to the environment,
        # so the limit travels in the spec's kwargs to jaxsim.make (-1: none, as Gymnasium's).
        steps = _NO_LIMIT if limit == -1 else limit
        spec = dataclasses.replace(spec, kwargs={**spec.kwargs, "max_episode_steps": steps})
        return gymnasium.make(spec, **kwargs)

    return _made_or_unregistered(env_id, make_one)


def make_vec(env_id: str, num_envs: int = 1, **kwargs) -> JaxsimVectorEnv:
    """`num_envs` copies of any jaxsim id (adapters included) as a `JaxsimVectorEnv`, through
    `gymnasium.make_vec(..., vectorization_mode="vector_entry_point")`.

    `kwargs`: the vector env's (`autoreset_mode`, `params`, `params_sampler`) and `jaxsim.make`
    arguments (`max_episode_steps=N` reaches jaxsim's limit).
    """
    return _made_or_unregistered(
        env_id,
        lambda gym_name: gymnasium.make_vec(
            gym_name, num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs
        ),
    )


def register_all() -> list[str]:
    """Registers every native jaxsim id in Gymnasium as "jaxsim/<id>" (done once, on import).

    Adapter ids are registered one by one (`register`): their libraries list their own.

    Returns:
      The Gymnasium ids registered.
    """
    return [register(env_id) for env_id in envs.registered_ids()]


register_all()
