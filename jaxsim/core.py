"""The environment interface: stateless `Env` objects with pure `reset` and `step`."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Generic, TypeVar

import jax
import jax.numpy as jnp
from flax import struct

from jaxsim import rng
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

    Subclasses write their physics once, as elementwise jnp code over the fields of their state
    dataclass, so the same functions run on one environment (under `vmap`, the scan backend) and
    on a block of environments inside a Pallas kernel (the fused backend):

    - `init_state(u, params)`: a fresh state from `num_reset_uniforms` uniforms in [0, 1);
    - `dynamics(state, action, params) -> (state, reward, terminated)`: one step of the MDP,
      leaving the step counter `state.time` alone;
    - `obs_fields(state, params)`: the observation's components, stacked on the last axis by
      `observe`.

    The base class owns the time limit: `step` counts steps and sets `truncated` once
    `state.time` reaches `params.max_episode_steps`. `step` never resets.

    Environments compare and hash by (class, overrides), so a jitted rollout compiled for one is
    reused for an equal one.
    """

    id: ClassVar[str]
    params_type: ClassVar[type]
    state_type: ClassVar[type]
    num_reset_uniforms: ClassVar[int]
    # True if `dynamics` needs randomness; the classic-control environments are deterministic.
    stochastic: ClassVar[bool] = False

    def __init__(self, **overrides):
        fields = {f.name for f in dataclasses.fields(self.params_type)}
        unknown = sorted(set(overrides) - fields)
        if unknown:
            raise TypeError(
                f"{self.id}: unknown parameter(s) {unknown}; valid parameters are {sorted(fields)}"
            )
        self._overrides = tuple(sorted(overrides.items()))

    # -- to implement -----------------------------------------------------------------------------
    def init_state(self, u: tuple[jax.Array, ...], params: Params) -> State:
        raise NotImplementedError

    def dynamics(self, state: State, action: jax.Array, params: Params):
        raise NotImplementedError

    def obs_fields(self, state: State, params: Params) -> tuple[jax.Array, ...]:
        raise NotImplementedError

    def observation_space(self, params: Params) -> Space:
        raise NotImplementedError

    def action_space(self, params: Params) -> Space:
        raise NotImplementedError

    # -- provided ---------------------------------------------------------------------------------
    @property
    def default_params(self) -> Params:
        return self.params_type(**dict(self._overrides))

    def observe(self, state: State, params: Params) -> jax.Array:
        fields = self.obs_fields(state, params)
        return jnp.stack([jnp.asarray(f, jnp.float32) for f in fields], axis=-1)

    def reset(self, key: jax.Array, params: Params) -> tuple[State, jax.Array]:
        """A fresh episode for one environment: (state, obs)."""
        self.check_params(params)
        seed = rng.seed_from_key(key)
        return self.reset_at(seed, jnp.uint32(0), jnp.uint32(0), params)

    def reset_at(self, seed, index, counter, params: Params) -> tuple[State, jax.Array]:
        """Counter-based reset: the draw for environment `index` at step `counter`.

        Elementwise in `index` and `counter`; this is what rollouts use for auto-reset.
        """
        u = tuple(
            rng.uniform(seed, index, counter, rng.RESET_STREAM + j)
            for j in range(self.num_reset_uniforms)
        )
        return self.reset_from_uniforms(u, params)

    def reset_from_uniforms(self, u, params: Params) -> tuple[State, jax.Array]:
        state = self.init_state(u, params)
        return state, self.observe(state, params)

    def step(
        self, key: jax.Array, state: State, action: jax.Array, params: Params
    ) -> tuple[State, TimeStep]:
        """One step of one environment. Never resets; see `jaxsim.rollout` for auto-reset."""
        del key  # The classic-control dynamics are deterministic.
        self.check_params(params)
        state, reward, terminated = self.dynamics(state, action, params)
        state = state.replace(time=state.time + jnp.int32(1))
        truncated = state.time >= params.max_episode_steps
        ts = TimeStep(
            obs=self.observe(state, params),
            reward=jnp.asarray(reward, jnp.float32),
            terminated=jnp.asarray(terminated, jnp.bool_),
            truncated=jnp.asarray(truncated, jnp.bool_),
        )
        return state, ts

    def check_params(self, params) -> None:
        if not isinstance(params, self.params_type):
            raise TypeError(
                f"{self.id}: params must be {self.params_type.__name__} "
                f"(use env.default_params), got {type(params).__name__}"
            )

    def __eq__(self, other):
        return type(other) is type(self) and other._overrides == self._overrides

    def __hash__(self):
        return hash((type(self), self._overrides))

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self._overrides)
        return f"jaxsim.make({self.id!r}{', ' if args else ''}{args})"
