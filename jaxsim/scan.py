"""The scan backend: `lax.scan` over vmapped steps, for any environment and policy."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from jaxsim import params as params_lib
from jaxsim import rng, sharding
from jaxsim.autoreset import ResetDraws, map_with_axes
from jaxsim.core import Env
from jaxsim.plan import RolloutInputs, RolloutSpec, combine, combine_sampler
from jaxsim.policies import OpenLoopPolicy, split_policy_output
from jaxsim.record_scan import record_scan
from jaxsim.reuse import donating
from jaxsim.spaces import Space
from jaxsim.trajectory import STEP_OUTPUTS, RolloutState, Trajectory
from jaxsim.transition import (
    Carry,
    Lanes,
    expand_obs,
    initial_carry,
    policy_step,
    record_obs,
    stack_obs,
)

OBS_FIELDS = ("obs", "next_obs")


def check_action(space: Space, action, num_envs: int) -> None:
    expected = (num_envs, *space.shape)
    if action.shape != expected or action.dtype != space.dtype:
        raise ValueError(
            f"rollout: policy returned an action of shape {tuple(action.shape)} and dtype "
            f"{action.dtype}; the action space {space} with num_envs={num_envs} needs shape "
            f"{expected} and dtype {jnp.dtype(space.dtype).name}"
        )


# --------------------------------------------------------------------------------- policy as args
# A policy may be a plain function (static: part of the compile-cache key) or a pytree callable
# holding arrays, e.g. network weights: its arrays are passed as arguments, so new weights of the
# same shapes reuse the compiled rollout.
@dataclasses.dataclass(frozen=True)
class ScanPolicy:
    """A policy on the whole batch, `jaxsim.transition.policy_step`'s adapter on the scan: it
    reads obs[num_envs, *obs_shape] and takes, per step, its key, its seed (a counter-based
    policy's `act_from_seed`) or, open loop, that step's actions."""

    policy: Any
    space: Space
    num_envs: int

    def view(self, env, columns):
        return stack_obs(env, columns)

    def act(self, env, policy_input, index, obs):
        if isinstance(self.policy, OpenLoopPolicy):
            out = policy_input
        elif getattr(self.policy, "act_from_seed", None):
            out = self.policy.act_from_seed(policy_input, index, obs)
        else:
            out = self.policy(policy_input, obs)
        action, extras = split_policy_output(out)
        check_action(self.space, action, self.num_envs)
        return action, extras


# ------------------------------------------------------------------------------------ scan backend
def initial_state(
    env: Env, key: jax.Array, num_envs: int, params=None, params_sampler=None, mesh=None
) -> RolloutState:
    """The batch a rollout starts from when given no state: env i reset at counter 0.

    With a `params_sampler`, each environment's first episode draws its params at counter 0.
    With a `mesh`, the batch (leaves [num_envs, ...]) is split over its `jaxsim.ENV_AXIS` axis,
    as `rollout(..., mesh=mesh)` splits it.
    """
    params = params_lib.as_arrays(env.default_params if params is None else params)
    if mesh is not None:
        mesh = sharding.check_mesh(mesh, num_envs, owner="initial_state")
        sharding.check_placement(mesh, "initial_state", params=params)
    params_axes = env.params_axes(params, num_envs, owner="initial_state")
    params = _constrain_params(params, params_axes, mesh)
    draws = _sharded_draws(env, key, num_envs, params_sampler, mesh)
    lanes = Lanes(vmapped=True)
    carry = initial_carry(env, lanes, params, params_axes, draws, False, False)
    state = carry.to_state(env, lanes, params, params_axes)
    return sharding.constrain(state, mesh).replace(
        next_key=rng.continuation_keys(key, num_envs, mesh)
    )


def _constrain_params(params, params_axes, mesh):
    """Per-environment params leaves split like the batch; shared ones left to the partitioner."""
    if mesh is None:
        return params
    return map_with_axes(
        lambda x, axis: x if axis is None else sharding.constrain(x, mesh), params, params_axes
    )


def _sharded_draws(env, key, num_envs, sampler, mesh) -> ResetDraws:
    """A rollout's reset draws; on a mesh their [num_envs] leaves start split like the batch."""
    draws = ResetDraws.for_rollout(env, key, num_envs, sampler)
    if mesh is None:
        return draws
    return draws.replace(
        index=sharding.constrain(draws.index, mesh),
        reset_keys=sharding.constrain(draws.reset_keys, mesh),
        step_keys=sharding.constrain(draws.step_keys, mesh),
    )


def _scan_rollout(spec: RolloutSpec, inputs: RolloutInputs, into):
    env, n, num_envs, mesh = spec.env, spec.n, spec.num_envs, spec.mesh
    policy = combine(inputs.policy, spec.policy)
    sampler = combine_sampler(spec, inputs)
    # Shapes and dtypes never depend on params values, which may be traced here.
    space = env.action_space(env.default_params)
    params_axes = spec.params_axes
    params = _constrain_params(inputs.params, params_axes, mesh)
    # Compact resets gather the done lanes into one array: on a mesh that would pull them across
    # devices each step, where a whole-batch reset stays on each device's shard.
    lanes = Lanes(vmapped=True, compact_reset=mesh is None)
    draws = _sharded_draws(env, inputs.key, num_envs, sampler, mesh)
    with_sums, checks = spec.with_sums, spec.checks
    if inputs.state is None:
        carry = initial_carry(env, lanes, params, params_axes, draws, with_sums, checks)
    else:
        carry = Carry.from_state(inputs.state, with_sums, checks)
    # On a mesh, GSPMD splits the scan: the carry and each step's outputs stay split over the
    # batch (the lazy reset's `any done` becomes one small all-reduce per step).
    carry = sharding.constrain(carry, mesh)
    keys = rng.RolloutKeys.split(inputs.key)
    # Per-step policy keys (and, for counter-based policies, their seeds) are drawn before the
    # loop: on the CPU each threefry call in the body is a rolled loop costing about a microsecond.
    steps = jnp.arange(n, dtype=jnp.int32)
    if isinstance(policy, OpenLoopPolicy):  # step t plays actions[t]; rollout checked them
        policy_inputs = policy.actions[:n]
    elif getattr(policy, "act_from_seed", None):
        policy_inputs = keys.policy_seeds(n)
    else:
        policy_inputs = keys.policy_keys(n)
    fields = spec.fields
    # Observations recorded as the environment's compact components, expanded after the loop.
    packed = [name for name in OBS_FIELDS if name in fields and env.obs_record_dtype is not None]

    adapter = ScanPolicy(policy, space, num_envs)

    def body(carry: Carry, xs):
        t, policy_input = xs
        step_keys = None
        if env.draws.step_key:
            step_keys = sharding.constrain(keys.step_keys(t, num_envs), mesh)
        carry, values = policy_step(
            env, lanes, adapter, policy_input, carry, params, params_axes, t, draws, step_keys
        )
        if packed:
            values["obs"] = record_obs(env, values["obs_columns"])
            values["next_obs"] = record_obs(env, values["next_obs"])
        else:
            values["next_obs"] = stack_obs(env, values["next_obs"])
        out = sharding.constrain({name: values[name] for name in fields}, mesh)
        return sharding.constrain(carry, mesh), out

    with jax.named_scope("rollout"):
        into = None if into is None else dict(zip(fields, into, strict=True))
        # A donated observation buffer is not written in the loop: the observations are
        # expanded into it after (the whole buffer updated, so the program keeps it as input).
        kept = {name: into[name] for name in packed} if into else {}
        into = into and {name: None if name in kept else buf for name, buf in into.items()}
        carry, record = record_scan(
            body, carry, (steps, policy_inputs), place=_split_batch_axis(mesh), into=into
        )
        for name in packed:
            record[name] = expand_obs(env, record[name])
            if name in kept:
                zero = (0,) * record[name].ndim
                record[name] = jax.lax.dynamic_update_slice(kept[name], record[name], zero)
    record = sharding.constrain(record, mesh, batch_axis=1)
    per_step = {name: record.get(name) for name in STEP_OUTPUTS}
    stats = carry.sums.stats() if with_sums else None
    final_state = sharding.constrain(carry.to_state(env, lanes, params, params_axes), mesh)
    return Trajectory(**per_step, final_state=final_state, stats=stats, checks=carry.checks)


def _split_batch_axis(mesh):
    """Outputs [n, num_envs, ...] split over the mesh along the batch axis (None: no mesh)."""
    return None if mesh is None else lambda ys: sharding.constrain(ys, mesh, batch_axis=1)


scan_jit = jax.jit(_scan_rollout, static_argnums=0)
scan_into_jit = donating(jax.jit(_scan_rollout, static_argnums=0, donate_argnums=2))


def scan_rollout(spec: RolloutSpec, inputs: RolloutInputs, into=None) -> Trajectory:
    """The scan backend; `into`: the donated per-step buffers of `rollout(out=)`, or None."""
    if into is None:
        return scan_jit(spec, inputs, None)
    return scan_into_jit(spec, inputs, into)
