"""The one rollout step: an environment step on a batch, episode totals, streaming statistics
and same-step auto-reset.

`batch_step` is a rollout step on a batch: `jaxsim.core.env_transition` (the environment's own
step: dynamics, step counter, truncation), episode totals, streaming episode statistics and
same-step auto-reset. The scan backend calls it on the whole batch with the environment's
functions vmapped (`Lanes(vmapped=True)`); the fused kernel calls it on a block of lanes with
them applied directly (their physics is elementwise). Nothing else in jaxsim repeats this logic.

Auto-reset (`auto_reset`) takes each environment's fresh episode from counter-based draws
(`jaxsim.rng.ResetDraws`): each environment's numbers are a pure function of (seed, environment
index, counter), so any subset of the batch can draw its own without the rest:

- no environment done: nothing runs;
- on the compact path (`compact=True`), the done environments' indices are gathered into
  `reset_slots(batch)` slots, the reset draws and `init_state` run on the slots only, and the
  fresh states are scattered back; more done than slots take further passes of the same loop
  (a `lax.while_loop`), so the reset is traced and compiled once. A simulator whose reset costs
  a physics solve (brax: a forward pass of the pipeline) then pays for the environments that
  reset, not for the batch, and its reset is compiled once, not twice;
- without `compact` (the fused kernel, a mesh): `init_state` on the whole batch, selected where
  done, when any is.

Both paths draw the same numbers for every lane (counter-based, by index), so where
`init_state` computes each lane alone (jaxsim's native environments, gymnax) they give the same
states bit for bit (tests/jaxsim/test_autoreset.py). brax's reset is batched linear algebra (the
pipeline's mass matrix and contacts), whose float rounding on the CPU depends on the batch size:
ant from the same keys at 16 and at 256 lanes differs by up to 1e-7 relative in most leaves and
4e-5 in its contact terms, so there the two paths give the same episodes up to that rounding,
which brax's contacts then amplify (`python -m benchmarks.micro.compact_reset` records both). The
compact path always resets `reset_slots(batch)` lanes at a time, whatever the done count.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from jaxsim.core import env_transition, stack_obs
from jaxsim.rng import ResetDraws
from jaxsim.rollout.checks import check_flags
from jaxsim.rollout.trajectory import CheckState, EpisodeSums, RolloutState

# The compact path has room for a sixteenth of the batch. A lane's episode must last 16 steps
# on average for the done count to stay mostly within it (ant with random actions: ~40;
# CartPole: ~22); the slots' reset then costs a sixteenth of the batch's, and the gather and
# scatter around it touch only the slots' state.
RESET_FRACTION = 16


def map_with_axes(fn, params, params_axes):
    """`fn(leaf, axis)` over params leaves and their axes (None: shared, 0: per environment)."""
    return jax.tree.map(lambda axis, x: fn(x, axis), params_axes, params, is_leaf=_is_none)


def _is_none(x) -> bool:
    return x is None


def with_episode_params(params, params_axes, episode_params):
    """(params, axes) with the fields drawn for each environment's episode replacing the base."""
    if not episode_params:
        return params, params_axes
    return params.replace(**episode_params), params_axes.replace(**dict.fromkeys(episode_params, 0))


def _select(done, a, b):
    def one(x, y):
        return jnp.where(done.reshape(done.shape + (1,) * (jnp.ndim(x) - done.ndim)), x, y)

    return jax.tree.map(one, a, b)


def is_stateful(policy) -> bool:
    """Whether `policy` carries state between steps: it has `init_carry` (`jaxsim.rollout`)."""
    return callable(getattr(policy, "init_carry", None))


def reset_policy_carry(done: jax.Array, fresh, policy_carry):
    """A stateful policy's carry with `fresh` (`init_carry`'s values) where `done[batch]`: the
    next step of an environment whose episode ended starts from a fresh carry."""
    return _select(done, fresh, policy_carry)


def reset_slots(num_envs: int) -> int:
    """How many done environments the compact path resets: the power of two at or above
    num_envs / RESET_FRACTION (static: it fixes the slots' shapes). 1 for 16 or fewer."""
    return 1 << max(0, math.ceil(math.log2(max(1, math.ceil(num_envs / RESET_FRACTION)))))


def auto_reset(
    init_state: Callable,
    done: jax.Array,
    next_state,
    episode_params,
    params,
    params_axes,
    counter,
    draws: ResetDraws,
    compact: bool,
):
    """The batch's state after same-step auto-reset, and each environment's episode params.

    Args:
      init_state: `init_state(draw, params, params_axes, lanes) -> state` over a batch of
        `lanes` environments (the environment's reset mapped over them).
      done: bool[batch]: which environments start a new episode.
      next_state: the batch's state after the step; kept where not done.
      episode_params: the per-episode params fields (dict of [batch, ...]) or None.
      params, params_axes: the rollout's params and which leaves are per environment.
      counter: the reset draws' counter (uint32).
      draws: the batch's reset draws.
      compact: reset the done environments `reset_slots(batch)` at a time, on their own (see
        the module docstring); else the whole batch whenever any is done.

    Returns:
      (state, episode_params) with the done environments' replaced.
    """
    num_envs = done.shape[0]
    slots = reset_slots(num_envs)

    def whole(_):
        drawn = draws.episode_params(counter)
        reset_params, reset_axes = with_episode_params(params, params_axes, drawn)
        fresh = init_state(draws.reset_draw(counter), reset_params, reset_axes, num_envs)
        return _select(done, fresh, next_state), _select(done, drawn, episode_params)

    def keep(_):
        return next_state, episode_params

    def any_of(mask):  # Triton reduces no booleans: count the lanes as int32
        return jnp.max(mask.astype(jnp.int32)) > 0

    if not compact or slots >= num_envs:
        return jax.lax.cond(any_of(done), whole, keep, None)

    def next_slots(carry):
        # The first `slots` lanes still to reset, in order; the empty slots point past the
        # batch: they reset the last environment (clipped) and their results are dropped on the
        # way back.
        state, episode_params, pending = carry
        lanes = jnp.nonzero(pending, size=slots, fill_value=num_envs)[0]
        inside = jnp.minimum(lanes, num_envs - 1)
        part = draws.take(inside)
        drawn = part.episode_params(counter)
        part_params = map_with_axes(
            lambda x, axis: x if axis is None else x[inside], params, params_axes
        )
        reset_params, reset_axes = with_episode_params(part_params, params_axes, drawn)
        fresh = init_state(part.reset_draw(counter), reset_params, reset_axes, slots)

        def put(full, new):
            return full.at[lanes].set(new, mode="drop")

        state = jax.tree.map(put, state, fresh)
        episode_params = jax.tree.map(put, episode_params, drawn)
        return state, episode_params, pending.at[lanes].set(False, mode="drop")

    state, episode_params, _ = jax.lax.while_loop(
        lambda carry: any_of(carry[2]), next_slots, (next_state, episode_params, done)
    )
    return state, episode_params


@dataclasses.dataclass(frozen=True)
class Lanes:
    """How an environment's per-environment functions meet a batch.

    `vmapped`: the scan backend's way, any environment: `jax.vmap` over the batch, params mapped
    on their per-environment leaves. Otherwise the functions are called on the batch's arrays
    directly, the fused kernel's way, which needs elementwise physics.
    """

    vmapped: bool
    # The batch may reset only its done environments, gathered, while they are few, where the
    # environment asks for it (`Env.compact_reset`; `jaxsim.rollout.step`). Gathering needs a
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

    Auto-reset is same-step and costs what it needs (`jaxsim.rollout.step.auto_reset`): the reset
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
    (`jaxsim.rollout.scan.ScanPolicy`), the fused kernel's on a block
    (`jaxsim.fused.block.BlockPolicy`) and the Gymnasium front's, for actions the host gives
    (`jaxsim.gymnasium.programs`).

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
