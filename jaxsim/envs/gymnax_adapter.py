"""gymnax environments in jaxsim: `jaxsim.make("gymnax/Breakout-MinAtar")`.

gymnax's `reset_env` and `step_env` run untouched; jaxsim wraps them in its own time limit and
auto-reset (gymnax's `step` wrapper, which resets inside every step, is not used).

- Params: every scalar field of gymnax's `EnvParams` becomes a declared jaxsim params field
  (so it can be overridden in `make`, be drawn per environment with `jaxsim.uniform_params`, or
  vary per episode), and gymnax's `max_steps_in_episode` becomes `max_episode_steps`. Array
  fields (Acrobot's `available_torque`, DiscountingChain's `reward_timestep`) keep gymnax's
  defaults. Fields gymnax stores beside their inputs (CartPole's `total_mass`,
  `polemass_length`; `DERIVED`) are not params: they are recomputed from their inputs at every
  step, so overriding or randomising `masspole` or `length` moves them too.
- Ids: every gymnax id but those in `REFUSED` (named with the reason); `available()` lists them.
- Flags: `terminated` is gymnax's natural termination (`step_env`'s done); `truncated` is the
  time limit, as gymnax's `is_truncated` computes it. `next_obs` is the terminal observation.
- Randomness: resets take counter-based keys; stochastic dynamics take the rollout's step keys.
- Spaces: gymnax's Discrete and Box become jaxsim's, computed once from gymnax's default
  params, outside any trace (a rollout asks for them while tracing); a Discrete observation
  (FrozenLake) is a float32 scalar Box [0, n - 1]. Observations are float32.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar

import jax
import jax.numpy as jnp

from jaxsim.envs import adapters
from jaxsim.envs.adapters import AdapterEnv, AdapterState
from jaxsim.rng import Draws

PREFIX = "gymnax"
# EnvParams fields that gymnax keeps beside the fields they are computed from: id -> field ->
# its formula over the params (jaxsim's or gymnax's, any object with the input fields).
DERIVED = {
    "CartPole-v1": {
        "total_mass": lambda p: p.masscart + p.masspole,
        "polemass_length": lambda p: p.masspole * p.length,
    },
}
# gymnax ids jaxsim does not serve, and why.
REFUSED = {
    "MNISTBandit-bsuite": (
        "gymnax downloads the MNIST data set from the internet when it builds this environment"
    ),
}


class GymnaxEnv(AdapterEnv):
    """A gymnax environment; one subclass per gymnax id (made by `make`)."""

    library = "gymnax"
    draws = Draws(reset="key", step="key")  # gymnax's step takes a key
    _gymnax_env = None  # the gymnax environment object (stateless)
    _gymnax_params = None  # its default EnvParams: the values of the fields not exposed
    _derived: ClassVar[dict] = {}  # field -> formula (`DERIVED`)
    _spaces = None  # (observation, action) spaces, concrete

    def _inner_params(self, params):
        exposed = {s: getattr(params, s) for s in self._exposed}
        derived = {name: formula(params) for name, formula in self._derived.items()}
        return self._gymnax_params.replace(
            **exposed, **derived, max_steps_in_episode=params.max_episode_steps
        )

    def init_state(self, key, params) -> AdapterState:
        obs, inner = self._gymnax_env.reset_env(key, self._inner_params(params))
        return AdapterState(inner, adapters.float_obs(obs), jnp.int32(0))

    def dynamics(self, state: AdapterState, action, params, key):
        obs, inner, reward, terminated, _ = self._gymnax_env.step_env(
            key, state.inner, action, self._inner_params(params)
        )
        next_state = AdapterState(inner, adapters.float_obs(obs), state.time)
        # jaxsim's contract: a float32 reward, a bool flag (gymnax's bandits reward in int32).
        return next_state, jnp.asarray(reward, jnp.float32), jnp.asarray(terminated, jnp.bool_)

    def observation_space(self, params):
        return self._spaces[0]

    def action_space(self, params):
        return self._spaces[1]


def _space(space, obs: bool, obs_shape=()):
    kind = type(space).__name__
    if kind == "Discrete":
        if obs:  # at the shape gymnax's observation has (FrozenLake's is [1], not a scalar)
            return adapters.box(0, space.n - 1, obs_shape)
        return adapters.discrete(space.n)
    if kind == "Box":
        return adapters.box(space.low, space.high, space.shape)
    role = "observation" if obs else "action"
    raise TypeError(f"gymnax adapter: a {kind} {role} space is not supported (Discrete, Box are)")


def available() -> list[str]:
    """The gymnax ids `jaxsim.make("gymnax/<id>")` serves: gymnax's, less `REFUSED`."""
    gymnax = adapters.import_library("gymnax", f"{PREFIX}/<id>", PREFIX)
    return sorted(set(gymnax.registered_envs) - set(REFUSED))


@functools.cache
def env_class(name: str) -> type[GymnaxEnv]:
    """The jaxsim class wrapping gymnax's `name` (one per id, so equal envs hash equal)."""
    env_id = f"{PREFIX}/{name}"
    if name in REFUSED:
        raise ValueError(f"make: {env_id!r} is not served: {REFUSED[name]}")
    gymnax = adapters.import_library("gymnax", env_id, PREFIX)
    if name not in gymnax.registered_envs:
        raise ValueError(
            f"make: unknown gymnax id {name!r} in {env_id!r}; the gymnax ids served are "
            f"{available()}"
        )
    gymnax_env, gymnax_params = gymnax.make(name)
    return _wrap(env_id, gymnax_env, gymnax_params, DERIVED.get(name, {}))


@functools.cache
def _wrap_object(gymnax_env) -> type[GymnaxEnv]:
    """The jaxsim class wrapping a gymnax environment object of the user's (one per object)."""
    name = f"{PREFIX}/{type(gymnax_env).__name__}"  # until make names it by its id
    return _wrap(name, gymnax_env, gymnax_env.default_params, {})


def make_from(gymnax_env, **kwargs) -> GymnaxEnv:
    """A gymnax environment of the user's (an `Environment` object, or its class, made with no
    arguments) as a jaxsim environment; `kwargs` are its params fields (`jaxsim.register`)."""
    if isinstance(gymnax_env, type):
        gymnax_env = gymnax_env()
    return _wrap_object(gymnax_env)(**kwargs)


def _wrap(env_id, gymnax_env, gymnax_params, derived) -> type[GymnaxEnv]:
    for field_name, formula in derived.items():  # a guard against a gymnax that changed them
        default, computed = getattr(gymnax_params, field_name), formula(gymnax_params)
        if abs(float(default) - float(computed)) > 1e-6 * max(1.0, abs(float(default))):
            raise RuntimeError(
                f"{env_id}: gymnax's default {field_name}={default} is not what jaxsim derives "
                f"({computed}); this gymnax version changed it: update DERIVED"
            )
    with jax.ensure_compile_time_eval():  # concrete even if make is called while tracing
        obs = jax.eval_shape(
            lambda key: gymnax_env.reset_env(key, gymnax_params)[0], jax.random.key(0)
        )
        spaces = (
            _space(gymnax_env.observation_space(gymnax_params), obs=True, obs_shape=obs.shape),
            _space(gymnax_env.action_space(gymnax_params), obs=False),
        )
    fields, exposed = {}, []
    for f in dataclasses.fields(gymnax_params):
        value = getattr(gymnax_params, f.name)
        kind = adapters.scalar_kind(value)
        if f.name == "max_steps_in_episode" or f.name in derived or kind is None:
            continue
        default = value.item() if hasattr(value, "item") else value
        fields[f.name] = (kind, default, f"gymnax {env_id} EnvParams.{f.name}", {})
        exposed.append(f.name)
    limit = getattr(gymnax_params, "max_steps_in_episode", None)
    if limit is None:
        raise ValueError(
            f"{env_id}: gymnax params {type(gymnax_params).__name__} have no max_steps_in_episode; "
            "jaxsim needs the episode limit (gymnax's EnvParams declare it)"
        )
    fields["max_episode_steps"] = adapters.max_steps_field(limit, PREFIX)
    return adapters.adapter_class(
        GymnaxEnv,
        env_id,
        fields,
        _gymnax_env=gymnax_env,
        _gymnax_params=gymnax_params,
        _exposed=tuple(exposed),
        _derived=derived,
        _spaces=spaces,
    )


def make(name: str, **kwargs) -> GymnaxEnv:
    """`jaxsim.make("gymnax/<name>", **kwargs)`: kwargs are params fields (see `env_class`)."""
    return env_class(name)(**kwargs)
