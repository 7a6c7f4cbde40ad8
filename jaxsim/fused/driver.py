"""The fused backend's entry: checks, then the kernel on one device or per shard of a mesh."""

from __future__ import annotations

from jaxsim import plan
from jaxsim.fused import block as blk
from jaxsim.fused import compile_once, kernel, sharded
from jaxsim.fused.config import FusedConfig
from jaxsim.plan import RolloutInputs, RolloutSpec
from jaxsim.policies import OpenLoopPolicy
from jaxsim.trajectory import Trajectory, check_outputs


def fused_rollout(
    env,
    policy,
    n: int,
    *,
    num_envs: int,
    key,
    params,
    state,
    outputs,
    config,
    params_sampler=None,
    checks=False,
    reference=False,
    mesh=None,
    auto=False,
) -> Trajectory:
    """The fused backend on arguments `jaxsim.rollout` has validated (what tests call directly).

    Args:
      env, policy, n, num_envs, key, params, state, params_sampler, checks: as
        `jaxsim.rollout` (policy resolved, state a `RolloutState` or None; with checks, the
        trajectory's `checks` holds the per-environment record, which `rollout` reports).
      outputs: as `jaxsim.rollout`: a preset ("all", "rewards", "stats") or a collection of names.
      config: a `FusedConfig`, or None for the defaults.
      reference: run the plain-jnp reference (the same block step on the whole batch under
        `lax.scan`) instead of the kernel: what the kernel is tested against.
      mesh: a mesh `jaxsim.sharding.check_mesh` accepted, or None: the kernel runs per shard of
        the batch (`jaxsim.fused.sharded`).
      auto: `backend="auto"` chose the kernel: compile it first, once per configuration, and
        raise `KernelCompileError` if that fails (`jaxsim.fused.compile_once`).

    Returns:
      A `Trajectory` like the scan backend's (leaves the outputs left out are None).
    """
    spec, inputs = plan.make(
        env, n, num_envs, check_outputs(outputs), checks, key, params, state,
        params_sampler=params_sampler, mesh=mesh,
    )  # fmt: skip
    return run_fused(spec, policy, inputs, config, auto=auto, reference=reference)


def run_fused(
    spec: RolloutSpec, policy, inputs: RolloutInputs, config, *, auto=False, reference=False
) -> Trajectory:
    """The fused backend of a resolved rollout (`jaxsim.plan.make`): the policy's block form
    and the kernel's config join the spec, then the kernel runs on one device or per shard."""
    config = FusedConfig() if config is None else config
    if not isinstance(config, FusedConfig):
        raise TypeError(f"rollout: fused_config must be a FusedConfig, got {type(config).__name__}")
    env = spec.env
    reason = blk.unsupported_reason(env, policy)
    if reason is not None:
        raise ValueError(
            f"rollout: the fused backend cannot run this rollout ({reason}); "
            "use backend='scan', which runs any environment and policy"
        )
    if isinstance(policy, OpenLoopPolicy):
        policy.check(env.action_space(env.default_params), spec.n, spec.num_envs)
    if spec.sampler is not None and any(leaf is not None for leaf in spec.sampler[1]):
        raise ValueError(
            "rollout: the fused backend takes a params_sampler whose leaves are arrays "
            "(kernel inputs); use backend='scan' for this one"
        )
    block_policy, policy_inputs = blk.block_policy(policy)
    spec = spec.replace(policy=block_policy, fused=config, use_kernel=not reference)
    inputs = inputs.replace(policy=policy_inputs)
    if spec.mesh is not None:
        return sharded.sharded_rollout(spec, inputs, auto=auto)
    return compile_once.call(kernel.rollout_jit, (spec,), (inputs,), auto)
