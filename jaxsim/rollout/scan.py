"""The scan backend: `lax.scan` over vmapped steps, for any environment and policy.

The loop is `record_scan`, a `lax.scan` for a loop whose per-step outputs are a large trajectory.
`lax.scan` starts every output buffer as zeros; XLA's common-subexpression pass merges the
equal ones (obs with next_obs, reward with episode_return, action with episode_length,
terminated with truncated) into one broadcast per shape and dtype, and copy insertion then
copies that broadcast for each loop buffer. At CartPole, 4096 environments, 1000 steps, every
field recorded (205 MB of outputs), that is 101 MB read and written again before the first
step: about 5% of the call's time on the 2-core CPU. Here every buffer starts from its own fill
value, so each is one write and there is nothing to copy; the loop then overwrites every
element, so the fill values never show.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np

from jaxsim import params as params_lib
from jaxsim import rng, sharding
from jaxsim.core import Env, expand_obs, record_obs, stack_obs
from jaxsim.policies import OpenLoopPolicy, split_policy_output
from jaxsim.rng import ResetDraws
from jaxsim.rollout.checks import check_into, donating
from jaxsim.rollout.spec import RolloutInputs, RolloutSpec, combine, combine_sampler
from jaxsim.rollout.step import (
    Carry,
    Lanes,
    initial_carry,
    is_stateful,
    map_with_axes,
    policy_step,
    reset_policy_carry,
)
from jaxsim.rollout.trajectory import STEP_OUTPUTS, RolloutState, Trajectory
from jaxsim.spaces import Space

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
    """A policy on the whole batch, `jaxsim.rollout.step.policy_step`'s adapter on the scan: it
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


@dataclasses.dataclass(frozen=True)
class StatefulScanPolicy(ScanPolicy):
    """`ScanPolicy` for a stateful policy: its per-step input is (key, carry) and it returns
    (action, (extras, carry after the step)); the scan body takes the carry back out."""

    def act(self, env, policy_input, index, obs):
        key, policy_carry = policy_input
        out = self.policy(key, obs, policy_carry)
        if not (isinstance(out, tuple) and len(out) == 3):
            raise ValueError(
                "rollout: a stateful policy (one with init_carry) must return (action, extras, "
                f"carry) from policy(key, obs, carry), got {type(out).__name__}"
                + (f" of length {len(out)}" if isinstance(out, tuple) else "")
            )
        action, extras, policy_carry = out
        check_action(self.space, action, self.num_envs)
        return action, (extras, policy_carry)


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
    elif getattr(policy, "act_from_seed", None) and not is_stateful(policy):
        policy_inputs = keys.policy_seeds(n)
    else:  # a stateful policy takes keys: policy(key, obs, carry)
        policy_inputs = keys.policy_keys(n)
    fields = spec.fields
    # Observations recorded as the environment's compact components, expanded after the loop.
    packed = [name for name in OBS_FIELDS if name in fields and env.obs_record_dtype is not None]

    stateful = is_stateful(policy)
    adapter = (StatefulScanPolicy if stateful else ScanPolicy)(policy, space, num_envs)
    if stateful:  # the loop carries (Carry, policy carry); a stateless policy's loop is unchanged
        fresh = sharding.constrain(policy.init_carry(num_envs), mesh)
        start = fresh
        if inputs.state is not None and inputs.state.policy_carry is not None:
            start = sharding.constrain(inputs.state.policy_carry, mesh)
        carry = (carry, start)

    def body(carry, xs):
        t, policy_input = xs
        step_keys = None
        if env.draws.step_key:
            step_keys = sharding.constrain(keys.step_keys(t, num_envs), mesh)
        if stateful:
            carry, policy_carry = carry
            policy_input = (policy_input, policy_carry)
        carry, values = policy_step(
            env, lanes, adapter, policy_input, carry, params, params_axes, t, draws, step_keys
        )
        if stateful:
            values["extras"], policy_carry = values["extras"]
            done = values["terminated"] | values["truncated"]
            policy_carry = sharding.constrain(reset_policy_carry(done, fresh, policy_carry), mesh)
        if packed:
            values["obs"] = record_obs(env, values["obs_columns"])
            values["next_obs"] = record_obs(env, values["next_obs"])
        else:
            values["next_obs"] = stack_obs(env, values["next_obs"])
        out = sharding.constrain({name: values[name] for name in fields}, mesh)
        carry = sharding.constrain(carry, mesh)
        return ((carry, policy_carry) if stateful else carry), out

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
    policy_carry = None
    if stateful:
        carry, policy_carry = carry
    stats = carry.sums.stats() if with_sums else None
    final_state = sharding.constrain(carry.to_state(env, lanes, params, params_axes), mesh)
    if stateful:
        final_state = final_state.replace(policy_carry=policy_carry)
    return Trajectory(
        **per_step,
        final_state=final_state,
        stats=stats,
        checks=carry.checks,
        policy_carry=start if stateful else None,
    )


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


# ------------------------------------------------------------------- the recording loop
def record_scan(
    body: Callable[[Any, Any], tuple[Any, Any]],
    carry,
    xs,
    *,
    place: Callable[[Any], Any] | None = None,
    into=None,
):
    """What `jax.lax.scan(body, carry, xs)` returns, the per-step outputs written in place.

    Args:
      body: `body(carry, x) -> (carry, y)`; `x` is `xs` at step t, `y` a pytree of arrays.
      carry: the loop carry.
      xs: a pytree whose leaves have leading shape [n] (n >= 1), sliced at t for step t.
      place: applied to the output buffers before the loop (e.g. a sharding constraint), or None.
      into: buffers to write the outputs into (`ys`'s structure, shapes and dtypes, checked
        here, at trace time), e.g. an earlier call's outputs donated to this one; None: fresh.
        A dict may give None for some of its entries: those start fresh.

    Returns:
      (carry after step n - 1, ys): ys has `y`'s structure, leaves [n, *y_leaf.shape].
    """
    lengths = {leaf.shape[0] for leaf in jax.tree.leaves(xs)}
    if len(lengths) != 1:
        raise ValueError(f"record_scan: xs leaves need one leading length, got {sorted(lengths)}")
    (n,) = lengths
    x0 = jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape[1:], leaf.dtype), xs)
    # The buffers' shapes come from the step's outputs: trace the step once, for them and for
    # the loop, so a policy is traced as often as under lax.scan.
    step_jaxpr, (carry_shapes, y_shapes) = jax.make_jaxpr(body, return_shape=True)(carry, x0)
    run_step = jax.extend.core.jaxpr_as_fun(step_jaxpr)
    out_tree = jax.tree.structure((carry_shapes, y_shapes))
    if into is None:
        ys = _distinct_buffers(n, y_shapes)
    elif isinstance(into, dict) and None in into.values():  # some entries start fresh
        given = {k: v for k, v in into.items() if v is not None}
        ys = _distinct_buffers(n, {k: y for k, y in y_shapes.items() if k not in given})
        ys.update(_checked(n, {k: y_shapes[k] for k in given}, given))
    else:
        ys = _checked(n, y_shapes, into)
    if place is not None:
        ys = place(ys)

    def step(t, state):
        carry, ys = state
        x = jax.tree.map(lambda leaf: leaf[t], xs)
        carry, y = jax.tree.unflatten(out_tree, run_step(*jax.tree.leaves((carry, x))))
        ys = jax.tree.map(lambda buf, v: jax.lax.dynamic_update_index_in_dim(buf, v, t, 0), ys, y)
        return carry, ys

    return jax.lax.fori_loop(0, n, step, (carry, ys))


def _checked(n: int, y_shapes, into):
    """`into`, raising where it is not the [n, ...] buffers of outputs `y_shapes`."""
    full = jax.tree.map(lambda a: jax.ShapeDtypeStruct((n, *a.shape), a.dtype), y_shapes)
    check_into(into, full)
    return into


def _distinct_buffers(n: int, avals):
    """Buffers [n, *aval.shape], no two of the same shape and dtype filled with the same value.

    A bool has two values, so a third bool buffer of one shape shares a fill (and costs a copy);
    the results never depend on the fills.
    """
    seen: dict[tuple, int] = {}

    def one(aval):
        key = (aval.shape, aval.dtype)
        index = seen[key] = seen.get(key, -1) + 1
        shape = (n, *aval.shape)
        if aval.dtype == np.bool_:
            return jnp.full(shape, index % 2 == 1, aval.dtype)
        if jnp.issubdtype(aval.dtype, np.number):
            return jnp.full(shape, index % 100, aval.dtype)  # fits every numeric dtype
        return jax.lax.empty(shape, aval.dtype)  # e.g. PRNG keys: no numeric fill

    return jax.tree.map(one, avals)
