"""gymnax's interface over any jaxsim environment: `as_gymnax(env)` for gymnax-style trainers.

Code written against gymnax (PureJaxRL, rejax, Stoix) calls `env.reset(key, params)` and
`env.step(key, state, action, params)` on one environment and vmaps them itself. `as_gymnax`
gives a jaxsim environment, native MinAtar with its sticky actions included, exactly that
interface, without importing gymnax:

    env = jaxsim.as_gymnax("MinAtar/Breakout-v1")
    params = env.default_params
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    obs, state, reward, done, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
        keys, state, actions, params
    )

What differs from jaxsim's own `Env.step`, and what users must know:

- `step` auto-resets, as gymnax's does: where the episode ends, the returned obs and state are
  a fresh episode's (drawn from a key split off `step`'s, independent of the step's own draws),
  so the observation the episode ended on is only in `info["final_obs"]`. `step_env` and
  `reset_env` are the non-resetting versions (gymnax's names).
- `done = terminated | truncated`: the time limit is folded into `done`, as the classic gymnax
  5-tuple has it. `info` keeps them apart: `info["terminated"]`, `info["truncated"]` (bool) and
  `info["discount"] = 1 - terminated` (float32), so a trainer that bootstraps on truncation
  reads `info["discount"]` (or `terminated`), not `done`.

`info` holds, for one environment: `discount` float32[], `terminated` bool[], `truncated`
bool[] and `final_obs` (the observation of the step taken, before any reset; obs-shaped), from
`step` and `step_env` alike, so the two are interchangeable in a scan.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp

from jaxsim.core import Env
from jaxsim.envs import make
from jaxsim.spaces import Discrete, Space


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class GymnaxView:
    """One jaxsim environment behind gymnax's `Environment` interface (build it with
    `as_gymnax`).

    Stateless and hashable by the environment it wraps (jaxsim environments compare by class,
    static config and params overrides), so it is a static argument to `jax.jit` or a closed-over
    constant, as gymnax environments are; registered as a pytree without leaves, it may also be
    passed to a jitted function as an ordinary argument. Params are the jaxsim environment's
    params pytree (`default_params`); vmap over them, or over some of their leaves, for
    per-environment params. Every method is for one environment, unbatched: vmap it for a batch.

    The spaces are jaxsim's `Discrete` and `Box`, which carry gymnax's attributes (`n`; `low`,
    `high`; and `shape`, `dtype`, `sample(key)`, `contains(x)`).
    """

    env: Env

    # -- gymnax's properties --------------------------------------------------------------------
    @property
    def default_params(self) -> Any:
        """The jaxsim environment's default params (with `make`'s overrides)."""
        return self.env.default_params

    @property
    def name(self) -> str:
        """The jaxsim id, e.g. "CartPole-v1" or "MinAtar/Breakout-v1"."""
        return self.env.id

    @property
    def num_actions(self) -> int:
        """Discrete: the number of actions `n`; Box: the number of action components."""
        space = self.action_space()
        return space.n if isinstance(space, Discrete) else space.size

    def observation_space(self, params: Any = None) -> Space:
        """The observation space (jaxsim's `Box`: gymnax's attributes)."""
        return self.env.observation_space(self._params(params))

    def action_space(self, params: Any = None) -> Space:
        """The action space (jaxsim's `Discrete` or `Box`: gymnax's attributes)."""
        return self.env.action_space(self._params(params))

    # -- gymnax's methods -------------------------------------------------------------------------
    @functools.partial(jax.jit, static_argnames=("self",))
    def reset(self, key: jax.Array, params: Any = None) -> tuple[jax.Array, Any]:
        """A fresh episode: (obs, state), gymnax's order (jaxsim's `Env.reset` gives (state, obs)).

        Args:
          key: one PRNG key.
          params: the environment's params; None: `default_params`.
        Returns:
          obs [*obs_shape] of the observation space's dtype, and the jaxsim state.
        """
        return self.reset_env(key, self._params(params))

    @functools.partial(jax.jit, static_argnames=("self",))
    def step(
        self, key: jax.Array, state: Any, action: jax.Array, params: Any = None
    ) -> tuple[jax.Array, Any, jax.Array, jax.Array, dict[str, jax.Array]]:
        """One step, resetting where the episode ends (gymnax's semantics).

        `key` is split in two: one half for the step (`step_env`), the other for the reset, so
        the reset's draw is independent of the step's (a sticky-action draw, say).

        Args:
          key: one PRNG key.
          state: one environment's state (from `reset` or `step`).
          action: one action of `action_space(params)` (int for Discrete).
          params: the environment's params; None: `default_params`.
        Returns:
          (obs, state, reward float32[], done bool[], info): obs and state are the next
          episode's first where `done`, else the step's; `done = terminated | truncated`;
          `info` as `step_env`'s, its `final_obs` the observation the step reached.
        """
        params = self._params(params)
        key_step, key_reset = jax.random.split(key)
        obs_step, state_step, reward, done, info = self.step_env(key_step, state, action, params)
        obs_reset, state_reset = self.reset_env(key_reset, params)
        state = jax.tree.map(lambda r, s: jnp.where(done, r, s), state_reset, state_step)
        obs = jnp.where(done, obs_reset, obs_step)
        return obs, state, reward, done, info

    def reset_env(self, key: jax.Array, params: Any) -> tuple[jax.Array, Any]:
        """gymnax's environment-specific reset: `reset` with params required."""
        state, obs = self.env.reset(key, params)
        return obs, state

    def step_env(
        self, key: jax.Array, state: Any, action: jax.Array, params: Any
    ) -> tuple[jax.Array, Any, jax.Array, jax.Array, dict[str, jax.Array]]:
        """gymnax's non-resetting step: `step` without the reset (obs and state the step's).

        Returns:
          (obs, state, reward float32[], done bool[], info) with `info` holding `discount`
          float32[] (1 - terminated), `terminated` bool[], `truncated` bool[] and `final_obs`
          (here the returned obs itself).
        """
        state, ts = self.env.step(key, state, action, params)
        terminated = jnp.asarray(ts.terminated, jnp.bool_)
        truncated = jnp.asarray(ts.truncated, jnp.bool_)
        info = {
            "discount": 1.0 - terminated.astype(jnp.float32),
            "terminated": terminated,
            "truncated": truncated,
            "final_obs": ts.obs,
        }
        reward = jnp.asarray(ts.reward, jnp.float32)
        return ts.obs, state, reward, terminated | truncated, info

    def _params(self, params):
        return self.env.default_params if params is None else params

    def __repr__(self):
        return f"as_gymnax({self.env!r})"


def as_gymnax(env: Env | str | GymnaxView, **make_kwargs) -> GymnaxView:
    """A jaxsim environment behind gymnax's interface (see the module docstring).

    Args:
      env: a jaxsim `Env` (from `jaxsim.make`), or an environment id, made with
        `jaxsim.make(env, **make_kwargs)`; a `GymnaxView` is returned as it is.
      **make_kwargs: params overrides and static config for `jaxsim.make`, with an id only.
    Returns:
      A `GymnaxView`: `reset(key, params=None) -> (obs, state)`, `step(key, state, action,
      params=None) -> (obs, state, reward, done, info)` (auto-resetting), `reset_env`,
      `step_env`, `observation_space(params)`, `action_space(params)`, `default_params`,
      `num_actions`, `name`.
    """
    if isinstance(env, GymnaxView | Env) and make_kwargs:
        raise TypeError(
            f"as_gymnax: keyword arguments {sorted(make_kwargs)} are for jaxsim.make and go with "
            f"an environment id; env is already made ({env!r}): pass its id instead"
        )
    if isinstance(env, GymnaxView):
        return env
    if isinstance(env, str):
        env = make(env, **make_kwargs)
    if not isinstance(env, Env):
        raise TypeError(
            f"as_gymnax: env must be a jaxsim Env (from jaxsim.make) or an environment id "
            f"string such as 'CartPole-v1', got {type(env).__name__} {env!r}"
        )
    return GymnaxView(env)
