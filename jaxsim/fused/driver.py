"""The fused backend's entry: checks, then the kernel on one device or per shard of a mesh."""

from __future__ import annotations

import jax
import numpy as np

from jaxsim.fused import block as blk
from jaxsim.fused import compile_once, kernel, sharded
from jaxsim.fused.config import FusedConfig
from jaxsim.policies import OpenLoopPolicy
from jaxsim.transition import Trajectory, check_outputs


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
    """The fused backend of `jaxsim.rollout`, which validates the other arguments first.

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
    outputs = check_outputs(outputs)
    config = FusedConfig() if config is None else config
    if not isinstance(config, FusedConfig):
        raise TypeError(f"rollout: fused_config must be a FusedConfig, got {type(config).__name__}")
    reason = blk.unsupported_reason(env, policy)
    if reason is not None:
        raise ValueError(
            f"rollout: the fused backend cannot run this rollout ({reason}); "
            "use backend='scan', which runs any environment and policy"
        )
    if isinstance(policy, OpenLoopPolicy):
        policy.check(env.action_space(env.default_params), n, num_envs)
    bp = blk.block_policy(policy)
    sampler_leaves, sampler_static = [], None
    if params_sampler is not None:
        sampler_leaves, sampler_static = jax.tree.flatten(params_sampler)
        if not all(isinstance(x, jax.Array | np.ndarray) for x in sampler_leaves):
            raise ValueError(
                "rollout: the fused backend takes a params_sampler whose leaves are arrays "
                "(kernel inputs); use backend='scan' for this one"
            )
    if mesh is not None:
        return sharded.sharded_rollout(
            mesh, env, bp, sampler_static, n, num_envs, outputs, checks, config, not reference,
            sampler_leaves, key, params, state, auto=auto,
        )  # fmt: skip
    return compile_once.call(
        kernel.rollout_jit,
        (env, bp.kind, bp.static, sampler_static, n, num_envs, outputs, checks, config,
         not reference),
        (bp.inputs, sampler_leaves, key, params, state),
        auto,
    )  # fmt: skip
