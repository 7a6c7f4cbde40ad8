"""The fused backend's driver: its refusals, the batch in whole blocks, the kernel's inputs, and
the kernel on one device or per shard of a mesh.

`run_fused` refuses what the kernel cannot run (naming why), `rollout_blocks` pads the batch to
whole blocks of `FusedConfig.block_envs`, builds the first carry and the kernel's inputs, and runs
`jaxsim.fused.kernel.run` (or its reference, `jaxsim.fused.reference.run`) on them. On a mesh
(`_sharded`) each shard of `jaxsim.ENV_AXIS` runs the whole fused rollout on its
`num_envs / shards` environments, passing the kernel the global index of its first one, so resets
and built-in policies draw what the unsharded rollout draws. Nothing crosses shards but the
episode statistics (a `psum` per sum, once per rollout). Other mesh axes hold copies.
`backend="auto"` compiles the kernel first, once per configuration (`jaxsim.fused.compile_once`).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

from jaxsim import rng
from jaxsim.fused import block as blk
from jaxsim.fused import compile_once, kernel, reference
from jaxsim.fused.config import FusedConfig, refusal, unsupported_reason
from jaxsim.policies import OpenLoopPolicy
from jaxsim.rng import ResetDraws
from jaxsim.rollout.spec import RolloutInputs, RolloutSpec, combine_sampler
from jaxsim.rollout.step import Carry, Lanes, initial_carry, map_with_axes
from jaxsim.rollout.trajectory import STEP_OUTPUTS, Trajectory
from jaxsim.sharding import ENV_AXIS, batch_spec


def run_fused(
    spec: RolloutSpec, policy, inputs: RolloutInputs, config, *, auto=False, reference=False
) -> Trajectory:
    """The fused backend of a resolved rollout (`jaxsim.rollout.spec.make`): the policy's block form
    and the kernel's config join the spec, then the kernel runs on one device or per shard."""
    config = FusedConfig.for_family(spec.env, policy) if config is None else config
    if not isinstance(config, FusedConfig):
        raise TypeError(f"rollout: fused_config must be a FusedConfig, got {type(config).__name__}")
    env = spec.env
    reason = unsupported_reason(env, policy)
    if reason is not None:
        raise ValueError(refusal(reason))
    if isinstance(policy, OpenLoopPolicy):
        policy.check(env.action_space(env.default_params), spec.n, spec.num_envs)
    if spec.sampler is not None and any(leaf is not None for leaf in spec.sampler[1]):
        raise ValueError(
            "rollout: the fused backend takes a params_sampler whose leaves are arrays "
            "(kernel inputs); use backend='scan' for this one"
        )
    block_policy, policy_inputs = blk.block_policy(policy, config.mlp_first_layer)
    spec = spec.replace(policy=block_policy, fused=config, use_kernel=not reference)
    inputs = inputs.replace(policy=policy_inputs)
    if spec.mesh is not None:
        return compile_once.call(_sharded, (spec,), (inputs,), auto)
    return compile_once.call(rollout_jit, (spec,), (inputs,), auto)


def rollout_blocks(spec: RolloutSpec, inputs: RolloutInputs, axis_name=None) -> Trajectory:
    """The rollout; with `axis_name`, one shard of it inside `shard_map` (`_sharded`):
    `spec.num_envs` environments from global index axis_index * spec.num_envs, statistics over
    all shards."""
    env, n, num_envs, config = spec.env, spec.n, spec.num_envs, spec.fused
    key, params, state, checks = inputs.key, inputs.params, inputs.state, spec.checks
    offset = 0 if axis_name is None else lax.axis_index(axis_name) * num_envs
    policy = spec.policy
    sampler = combine_sampler(spec, inputs)
    padded = config.block_envs * math.ceil(num_envs / config.block_envs)
    fields = spec.fields
    policy_inputs = policy.prepare(inputs.policy, n, padded)
    params_axes = spec.params_axes

    with_sums = spec.with_sums
    if state is None:
        draws = ResetDraws.for_rollout(env, key, num_envs, sampler, offset)
        lanes = Lanes(vmapped=True)
        carry = initial_carry(env, lanes, params, params_axes, draws, with_sums, checks)
    else:
        carry = Carry.from_state(state, with_sums, checks)
    # Padded lanes repeat the last environment, so they step through valid physics.
    carry = jax.tree.map(lambda x: blk.pad_axis(x, padded), carry)
    padded_params = map_with_axes(
        lambda x, axis: x if axis is None else blk.pad_axis(jnp.asarray(x), padded),
        params,
        params_axes,
    )
    keys = rng.RolloutKeys.split(key)
    ins = dict(
        reset_seed=keys.reset_seed(),
        policy_seeds=keys.policy_seeds(n),
        policy=policy_inputs,
        sampler=sampler,
        index_offset=jnp.asarray(offset, jnp.uint32)[None],
    )

    def block_step(params, carry, t, seed, draws, values):
        return blk.step(env, policy, values, params, params_axes, carry, t, seed, draws, fields)

    def block_args(width):
        """Abstract arguments of `block_step` on `width` environments."""
        sds = jax.ShapeDtypeStruct
        u32 = sds((), jnp.uint32)

        def lanes(x):
            return sds((width, *x.shape[1:]), x.dtype)

        values = policy.abstract_step_inputs(policy_inputs, width)
        abstract_params = map_with_axes(
            lambda x, axis: sds(jnp.shape(x), jnp.asarray(x).dtype) if axis is None else lanes(x),
            padded_params,
            params_axes,
        )
        draws = ResetDraws(
            seed=(u32, u32),
            index=sds((width,), jnp.uint32),
            reset_keys=(sds((width,), jnp.uint32),) * len(env.reset_uniform_shapes()),
            sampler=jax.tree.map(lambda x: sds(x.shape, x.dtype), sampler),
            shapes=env.reset_uniform_shapes(),
            step_keys=(sds((width,), jnp.uint32),) * len(env.step_uniform_shapes()),
            step_shapes=env.step_uniform_shapes(),
        )
        t = sds((), jnp.int32)
        return abstract_params, jax.tree.map(lanes, carry), t, (u32, u32), draws, values

    # The record's leaves: shapes and dtypes of one step on the whole batch.
    template = jax.eval_shape(block_step, *block_args(padded))[1]
    layout = tuple(blk.output_layout(template))
    ins["params"] = padded_params
    if spec.use_kernel:
        example = block_args(config.block_envs)
        outs, carry = kernel.run(spec, layout, block_step, example, ins, carry)
    else:
        outs, carry = reference.run(spec, layout, block_step, ins, carry)

    if padded != num_envs:
        outs = [x[:, :num_envs] for x in outs]
        carry = jax.tree.map(lambda x: x[:num_envs], carry)
    record = blk.record_from_outputs(template, outs)
    if env.obs_shape is not None:  # the kernel wrote the components (MinAtar: packed words)
        for name in ("obs", "next_obs"):
            if record.get(name) is not None:
                record[name] = env.obs_from_components(record[name])
    final_state = carry.to_state(env, Lanes(vmapped=True), params, params_axes)
    stats = None if carry.sums is None else carry.sums.stats(axis_name)
    per_step = {name: record.get(name) for name in STEP_OUTPUTS}
    return Trajectory(**per_step, final_state=final_state, stats=stats, checks=carry.checks)


rollout_jit = jax.jit(rollout_blocks, static_argnums=0)


def _out_specs(outputs: tuple[str, ...], checks: bool) -> Trajectory:
    """How a shard's Trajectory pieces join: per step on axis 1, per environment on axis 0."""
    per_step = {name: batch_spec(1) if name in outputs else None for name in STEP_OUTPUTS}
    return Trajectory(
        **per_step,
        final_state=batch_spec(0),
        stats=P() if "episode_stats" in outputs else None,
        checks=batch_spec(0) if checks else None,
    )


@functools.partial(jax.jit, static_argnums=0)
def _sharded(spec: RolloutSpec, inputs: RolloutInputs) -> Trajectory:
    local = spec.num_envs // spec.mesh.shape[ENV_AXIS]
    time_major = spec.policy.time_major  # open-loop actions [n, num_envs]
    in_specs = RolloutInputs(
        key=P(),
        params=map_with_axes(
            lambda x, axis: P() if axis is None else batch_spec(0), inputs.params, spec.params_axes
        ),
        state=batch_spec(0),
        policy=[batch_spec(1) if time_major else P() for _ in inputs.policy],
        sampler=None if inputs.sampler is None else [P() for _ in inputs.sampler],
    )
    shard_spec = spec.replace(num_envs=local)

    def shard(inputs):
        return rollout_blocks(shard_spec, inputs, axis_name=ENV_AXIS)

    # check_vma=False: a pallas_call has no replication rule to check.
    run = jax.shard_map(
        shard,
        mesh=spec.mesh,
        in_specs=(in_specs,),
        out_specs=_out_specs(spec.outputs, spec.checks),
        check_vma=False,
    )
    return run(inputs)
