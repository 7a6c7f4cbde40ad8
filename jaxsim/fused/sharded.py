"""The fused backend on a mesh: the kernel runs per shard of the batch under `jax.shard_map`.

Each shard of `jaxsim.ENV_AXIS` runs the whole fused rollout on its `num_envs / shards`
environments, passing the kernel the global index of its first one, so resets and built-in
policies draw what the unsharded rollout draws. Nothing crosses shards but the episode
statistics (a `psum` per sum, once per rollout). Other mesh axes hold copies.
"""

from __future__ import annotations

import functools

import jax
from jax.sharding import PartitionSpec as P

from jaxsim.fused import compile_once, kernel
from jaxsim.fused.block import BlockPolicy
from jaxsim.sharding import ENV_AXIS, batch_spec
from jaxsim.transition import STEP_OUTPUTS, Trajectory, map_with_axes


def _out_specs(outputs: tuple[str, ...], checks: bool) -> Trajectory:
    """How a shard's Trajectory pieces join: per step on axis 1, per environment on axis 0."""
    per_step = {name: batch_spec(1) if name in outputs else None for name in STEP_OUTPUTS}
    return Trajectory(
        **per_step,
        final_state=batch_spec(0),
        stats=P() if "episode_stats" in outputs else None,
        checks=batch_spec(0) if checks else None,
    )


@functools.partial(jax.jit, static_argnums=tuple(range(11)))
def _sharded(
    mesh, env, kind, static, sampler_static, n, num_envs, outputs, checks, config, use_kernel,
    inputs, sampler_leaves, key, params, state,
):  # fmt: skip
    local = num_envs // mesh.shape[ENV_AXIS]
    params_axes = env.params_axes(params, num_envs)
    time_major = BlockPolicy(kind, static, None).time_major  # open-loop actions [n, num_envs]
    in_specs = (
        [batch_spec(1) if time_major else P() for _ in inputs],
        [P() for _ in sampler_leaves],
        P(),
        map_with_axes(lambda x, axis: P() if axis is None else batch_spec(0), params, params_axes),
        batch_spec(0),
    )

    def shard(*args):
        return kernel.rollout_blocks(
            env, kind, static, sampler_static, n, local, outputs, checks, config, use_kernel,
            *args, axis_name=ENV_AXIS,
        )  # fmt: skip

    # check_vma=False: a pallas_call has no replication rule to check.
    run = jax.shard_map(
        shard, mesh=mesh, in_specs=in_specs, out_specs=_out_specs(outputs, checks), check_vma=False
    )
    return run(inputs, sampler_leaves, key, params, state)


def sharded_rollout(
    mesh, env, bp: BlockPolicy, sampler_static, n, num_envs, outputs, checks, config, use_kernel,
    sampler_leaves, key, params, state, auto=False,
) -> Trajectory:  # fmt: skip
    """`driver.fused_rollout` on `mesh` (validated by `jaxsim.sharding.check_mesh`)."""
    return compile_once.call(
        _sharded,
        (mesh, env, bp.kind, bp.static, sampler_static, n, num_envs, outputs, checks, config,
         use_kernel),
        (bp.inputs, sampler_leaves, key, params, state),
        auto,
    )  # fmt: skip
