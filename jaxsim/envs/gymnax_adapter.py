"""gymnax environments in jaxsim: `jaxsim.make("gymnax/Breakout-MinAtar")`.

gymnax's `reset_env` and `step_env` run untouched; jaxsim wraps them in its own time limit and
auto-reset (gymnax's `step` wrapper, which resets inside every step, is not used).

- Params: every scalar field of gymnax's `EnvParams` becomes a declared jaxsim params field
  (so it can be overridden in `make`, be drawn per environment with `jaxsim.uniform_params`, or
  vary per episode), and gymnax's `max_steps_in_episode` becomes `max_episode_steps`. Array
  fields (Acrobot's `available_torque`, DiscountingChain's `reward_timestep`) keep gymnax's
  defaults.
- Flags: `terminated` is gymnax's natural termination (`step_env`'s done); `truncated` is the
  time limit, as gymnax's `is_truncated` computes it. `next_obs` is the terminal observation.
- Randomness: resets take counter-based keys; stochastic dynamics take the rollout's step keys.
- Spaces: gymnax's Discrete and Box become jaxsim's; a Discrete observation (FrozenLake) is a
  float32 scalar Box [0, n - 1]. Observations are float32.
"""

from __future__ import annotations

import dataclasses
import functools

import jax.numpy as jnp

from jaxsim.envs import adapters
from jaxsim.envs.adapters import AdapterEnv, AdapterState

PREFIX = "gymnax"


class GymnaxEnv(AdapterEnv):
    """A gymnax environment; one subclass per gymnax id (made by `make`)."""

    library = "gymnax"
    stochastic = True
    _gymnax_env = None  # the gymnax environment object (stateless)
    _gymnax_params = None  # its default EnvParams: the values of the fields not exposed

    def _inner_params(self, params):
        exposed = {s: getattr(params, s) for s in self._exposed}
        return self._gymnax_params.replace(**exposed, max_steps_in_episode=params.max_episode_steps)

    def init_state(self, key, params) -> AdapterState:
        obs, inner = self._gymnax_env.reset_env(key, self._inner_params(params))
        return AdapterState(inner, adapters.float_obs(obs), jnp.int32(0))

    def dynamics(self, state: AdapterState, action, params, key):
        obs, inner, reward, terminated, _ = self._gymnax_env.step_env(
            key, state.inner, action, self._inner_params(params)
        )
        next_state = AdapterState(inner, adapters.float_obs(obs), state.time)
        return next_state, reward, terminated

    def observation_space(self, params):
        return _space(self._gymnax_env.observation_space(self._gymnax_params), obs=True)

    def action_space(self, params):
        return _space(self._gymnax_env.action_space(self._gymnax_params), obs=False)


def _space(space, obs: bool):
    kind = type(space).__name__
    if kind == "Discrete":
        if obs:
            return adapters.box(0, space.n - 1, ())
        return adapters.discrete(space.n)
    if kind == "Box":
        return adapters.box(space.low, space.high, space.shape)
    role = "observation" if obs else "action"
    raise TypeError(f"gymnax adapter: a {kind} {role} space is not supported (Discrete, Box are)")


@functools.cache
def env_class(name: str) -> type[GymnaxEnv]:
    """The jaxsim class wrapping gymnax's `name` (one per id, so equal envs hash equal)."""
    env_id = f"{PREFIX}/{name}"
    gymnax = adapters.import_library("gymnax", env_id, PREFIX)
    if name not in gymnax.registered_envs:
        raise ValueError(
            f"make: unknown gymnax id {name!r} in {env_id!r}; gymnax has "
            f"{sorted(gymnax.registered_envs)}"
        )
    gymnax_env, gymnax_params = gymnax.make(name)
    fields, exposed = {}, []
    for f in dataclasses.fields(gymnax_params):
        value = getattr(gymnax_params, f.name)
        kind = adapters.scalar_kind(value)
        if f.name == "max_steps_in_episode" or kind is None:
            continue
        default = value.item() if hasattr(value, "item") else value
        fields[f.name] = (kind, default, f"gymnax {name} EnvParams.{f.name}", {})
        exposed.append(f.name)
    limit = gymnax_params.max_steps_in_episode
    fields["max_episode_steps"] = adapters.max_steps_field(limit, PREFIX)
    return adapters.adapter_class(
        GymnaxEnv,
        env_id,
        fields,
        _gymnax_env=gymnax_env,
        _gymnax_params=gymnax_params,
        _exposed=tuple(exposed),
    )


def make(name: str, **kwargs) -> GymnaxEnv:
    """`jaxsim.make("gymnax/<name>", **kwargs)`: kwargs are params fields (see `env_class`)."""
    return env_class(name)(**kwargs)
