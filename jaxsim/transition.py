"""The one transition path: a rollout step's bookkeeping (time limit, totals, auto-reset).

`env_transition` is one environment step less the observation's stacking: dynamics, step
counter, dtype casts, truncation at `max_episode_steps`. `Env.step` is it plus a stack.
`batch_step` is a rollout step on a batch: `env_transition`, episode totals, streaming episode
statistics and same-step auto-reset. The scan backend calls it on the whole batch with the
environment's functions vmapped; the fused kernel calls it on a block of lanes with them applied
directly (their physics is elementwise). Nothing else in jaxsim repeats this logic.

Auto-reset and the reset draws live in `jaxsim.autoreset`.

The types a rollout returns live in `jaxsim.trajectory`. This module imports nothing from
`jaxsim.rollout` or `jaxsim.fused`: both import it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from jaxsim.autoreset import ResetDraws, auto_reset, with_episode_params
from jaxsim.checks import CheckState, check_flags, clip_action
from jaxsim.trajectory import EpisodeSums, RolloutState


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


@dataclasses.dataclass(frozen=True)
class Lanes:
    """How an environment's per-environment functions meet a batch.

    `vmapped`: the scan backend's way, any environment: `jax.vmap` over the batch, params mapped
    on their per-environment leaves. Otherwise the functions are called on the batch's arrays
    directly, the fused kernel's way, which needs elementwise physics.
    """

    vmapped: bool
    # The batch may reset only its done environments, gathered, while they are few, where the
    # environment asks for it (`Env.compact_reset`; `jaxsim.autoreset`). Gathering needs a
    # whole batch in one array: vmapped lanes on one device, not a block of the fused kernel.
    compact_reset: bool = False

    def __post_init__(self):
        if self.compact_reset and not self.vmapped:
            raise ValueError("Lanes: compact_reset=True needs vmapped=True (a whole batch)")

    def __call__(self, fn: Callable, params_axes) -> Callable:
        """`fn(*batched, params)` over the batch."""
        if not self.vmapped:
            return fn

        def call(*args):
            *batched, params = args
            return jax.vmap(fn, in_axes=(*[0] * len(batched), params_axes))(*batched, params)

        return call

    def init_state(self, env, draw, params, params_axes, num_lanes: int):
        """Fresh states of `num_lanes` environments from their reset draws. A leaf the reset
        makes a constant (a fixed start, drawing nothing) takes the batch's shape, as vmap
        would give it on a block of the kernel."""
        if self.vmapped:
            in_axes = (0, params_axes)
            return jax.vmap(env.init_state, in_axes=in_axes, axis_size=num_lanes)(draw, params)
        return jax.tree.map(
            lambda x, t: jnp.broadcast_to(x, (num_lanes, *t.shape)),
            env.init_state(draw, params),
            env.state_template(),
        )

    def observe(self, env, state, params, params_axes) -> tuple[jax.Array, ...]:
        """The observation as float32 [batch] components, one per `obs_fields` entry."""
        return _columns(self(env.obs_components, params_axes)(state, params), state)


def _columns(obs_fields, state) -> tuple[jax.Array, ...]:
    """Observation components as float32 arrays of the batch's shape (constants broadcast).

    A component is one number per environment, or (`Env.array_obs`) a whole observation
    [batch, *obs_shape], whose trailing axes are kept.
    """
    shape = jnp.shape(state.time)

    def column(f):
        f = jnp.asarray(f, jnp.float32)
        return jnp.broadcast_to(f, shape + f.shape[len(shape) :])

    return tuple(column(f) for f in obs_fields)


@struct.dataclass
class Carry:
    """What a rollout keeps between steps. Leaves are [batch]; `sums` is None unless asked."""

    env_state: Any
    episode_return: jax.Array
    episode_length: jax.Array
    episode_params: dict[str, jax.Array] | None
    sums: EpisodeSums | None
    checks: CheckState | None = None

    @classmethod
    def from_state(cls, state: RolloutState, with_sums: bool, with_checks: bool) -> Carry:
        num_envs = state.episode_return.shape[0]
        return cls(
            state.env_state,
            state.episode_return,
            state.episode_length,
            state.episode_params,
            EpisodeSums.zeros(num_envs) if with_sums else None,
            CheckState.zeros(num_envs) if with_checks else None,
        )

    def checked(self, env, t, obs, action, extras, record, params=None, params_axes=None) -> Carry:
        """The carry with this step's checks recorded (a no-op outside checked mode).

        `params`, `params_axes`: the params this step ran with (episode draws included)."""
        if self.checks is None:
            return self
        flags = check_flags(env, obs, action, extras, record, params, params_axes)
        return self.replace(checks=self.checks.update(flags, t))

    def to_state(self, env, lanes: Lanes, params, params_axes) -> RolloutState:
        """The public `RolloutState`, with the observation of the current state."""
        step_params, step_axes = with_episode_params(params, params_axes, self.episode_params)
        obs = stack_obs(env, lanes.observe(env, self.env_state, step_params, step_axes))
        return RolloutState(
            self.env_state, obs, self.episode_return, self.episode_length, self.episode_params
        )


def batch_step(
    env,
    lanes: Lanes,
    carry: Carry,
    action,
    params,
    params_axes,
    counter,
    draws: ResetDraws,
    keys=None,
):
    """One rollout step of a batch: transition, episode totals, statistics, auto-reset.

    Args:
      env: the environment.
      lanes: how its functions meet the batch (vmapped, or elementwise on a block).
      carry: the batch before the step.
      action: action[batch, ...] the policy chose.
      params, params_axes: the rollout's params and which of their leaves are per environment
        (see `jaxsim.params.batch_axes`); fields drawn per episode come from `carry`.
      counter: the step number after this step (uint32), the counter of the reset draws.
      draws: where resets (and per-episode params, and the dynamics' step uniforms) come from.
      keys: per-environment PRNG keys [batch] for a stochastic environment's dynamics, or None.

    Auto-reset is same-step and costs what it needs (`jaxsim.autoreset.auto_reset`): the reset
    draws and `init_state` run only when some environment of the batch is done (a `lax.cond` or
    `lax.switch`; under an outer `vmap` it becomes a select, and runs always), and, with
    `lanes.compact_reset` and `env.compact_reset`, only on the done environments while few are.
    Where an environment is done its state, totals and episode params are replaced in this step.

    Returns:
      (carry after the step, record): record holds `next_obs` (float32 [batch] components, taken
      before the reset), `reward`, `terminated`, `truncated`, and the episode totals
      `episode_return` and `episode_length` including this step.
    """
    step_params, step_axes = with_episode_params(params, params_axes, carry.episode_params)

    def transition(state, action, keys, u, params):
        return env_transition(env, state, action, params, keys, u)

    next_state, fields, reward, terminated, truncated = lanes(transition, step_axes)(
        carry.env_state, action, keys, draws.step_draw(counter), step_params
    )
    next_obs = _columns(fields, next_state)
    done = terminated | truncated
    episode_return = carry.episode_return + reward
    episode_length = carry.episode_length + jnp.int32(1)

    def init_state(draw, reset_params, reset_axes, num_lanes):
        return lanes.init_state(env, draw, reset_params, reset_axes, num_lanes)

    env_state, episode_params = auto_reset(
        init_state,
        done,
        next_state,
        carry.episode_params,
        params,
        params_axes,
        counter,
        draws,
        compact=lanes.compact_reset and env.compact_reset,
    )
    new_carry = Carry(
        env_state=env_state,
        episode_return=jnp.where(done, 0.0, episode_return),
        episode_length=jnp.where(done, 0, episode_length),
        episode_params=episode_params,
        sums=None if carry.sums is None else carry.sums.add(done, episode_return, episode_length),
        checks=carry.checks,
    )
    record = dict(
        next_obs=next_obs,
        reward=reward,
        terminated=terminated,
        truncated=truncated,
        episode_return=episode_return,
        episode_length=episode_length,
    )
    return new_carry, record


def policy_step(
    env, lanes: Lanes, policy, policy_input, carry: Carry, params, params_axes, t, draws, keys=None
):
    """Step `t` of a rollout: observe, act through a policy adapter, then `batch_step`.

    Every way of stepping a batch is this function with an adapter: the scan backend's
    (`jaxsim.scan.ScanPolicy`), the fused kernel's on a block (`jaxsim.fused.block.BlockPolicy`)
    and the Gymnasium front's, for actions the host gives (`jaxsim.gymnasium_programs`).

    Args:
      env, lanes, carry, params, params_axes, draws, keys: as `batch_step`.
      policy: an adapter: `view(env, columns)` is the observation the policy reads and the
        record keeps (stacked, or the [batch] columns), `act(env, policy_input, index, obs) ->
        (action, extras)` the policy's choice from it and this step's `policy_input`.
      t: the step (int32 or uint32); the reset draws' counter is t + 1.

    Returns:
      (carry after the step, values): `batch_step`'s record plus `obs` (the adapter's view),
      `obs_columns` (the components it was made from), `action` and `extras`; in checked mode
      the carry records this step's checks.
    """
    step_params, step_axes = with_episode_params(params, params_axes, carry.episode_params)
    columns = lanes.observe(env, carry.env_state, step_params, step_axes)
    obs = policy.view(env, columns)
    with jax.named_scope("policy"):
        action, extras = policy.act(env, policy_input, draws.index, obs)
    with jax.named_scope("env_step"):
        counter = (t + 1).astype(jnp.uint32)
        carry, record = batch_step(
            env, lanes, carry, action, params, params_axes, counter, draws, keys
        )
    carry = carry.checked(env, t, columns, action, extras, record, step_params, step_axes)
    return carry, dict(record, obs=obs, obs_columns=columns, action=action, extras=extras)


def initial_carry(
    env, lanes: Lanes, params, params_axes, draws: ResetDraws, with_sums: bool, with_checks: bool
):
    """Every environment reset at counter 0 (episode params drawn at counter 0 too)."""
    drawn = draws.episode_params(0)
    reset_params, reset_axes = with_episode_params(params, params_axes, drawn)
    env_state = lanes.init_state(
        env, draws.reset_draw(0), reset_params, reset_axes, draws.index.shape[0]
    )
    num_envs = draws.index.shape[0]
    zeros = jnp.zeros((num_envs,), jnp.float32)
    sums = EpisodeSums.zeros(num_envs) if with_sums else None
    checks = CheckState.zeros(num_envs) if with_checks else None
    return Carry(env_state, zeros, jnp.zeros((num_envs,), jnp.int32), drawn, sums, checks)


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
