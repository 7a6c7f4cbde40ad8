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

from jaxsim.autoreset import map_with_axes
from jaxsim.fused import compile_once, kernel
from jaxsim.plan import RolloutInputs, RolloutSpec
from jaxsim.sharding import ENV_AXIS, batch_spec
from jaxsim.trajectory import STEP_OUTPUTS, Trajectory


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
        return kernel.rollout_blocks(shard_spec, inputs, axis_name=ENV_AXIS)

    # check_vma=False: a pallas_call has no replication rule to check.
    run = jax.shard_map(
        shard,
        mesh=spec.mesh,
        in_specs=(in_specs,),
        out_specs=_out_specs(spec.outputs, spec.checks),
        check_vma=False,
    )
    return run(inputs)


def sharded_rollout(spec: RolloutSpec, inputs: RolloutInputs, auto=False) -> Trajectory:
    """`driver.run_fused` on `spec.mesh` (validated by `jaxsim.sharding.check_mesh`)."""
    return compile_once.call(_sharded, (spec,), (inputs,), auto)
