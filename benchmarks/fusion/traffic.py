"""The fused kernel's memory traffic per env-step, from shapes (analytic) and from XLA's cost
analysis, and the H200's floors it is compared with."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

import jaxsim
from jaxsim.fused.block import pad_mlp

H200_BANDWIDTH = 4.3e12  # bytes/s, measured device-to-device copy
H200_FP32_FLOPS = 67e12


def step_bytes(x) -> int:
    """Bytes per env-step of a per-step leaf [n, num_envs, ...]; bools travel as int8."""
    return (1 if x.dtype == jnp.bool_ else x.dtype.itemsize) * math.prod(x.shape[2:])


def env_bytes(x) -> int:
    """Bytes per environment of a state leaf [num_envs, ...]."""
    return x.dtype.itemsize * math.prod(x.shape[1:])


def kernel_bytes_per_step(policy, traj, n, k, block_envs) -> dict[str, float]:
    """Device-memory traffic of the fused kernel and its epilogue per env-step (analytic)."""
    kept = [getattr(traj, f) for f in jaxsim.STEP_OUTPUTS if getattr(traj, f) is not None]
    written = sum(step_bytes(leaf) for leaf in jax.tree.leaves(kept))
    fs = traj.final_state
    state = sum(env_bytes(x) for x in jax.tree.leaves((fs.env_state, fs.episode_return)))
    state += env_bytes(fs.episode_length) + (16 if traj.stats is not None else 0)
    launches = math.ceil(n / k)
    if isinstance(policy, jaxsim.MLPPolicy):
        policy = pad_mlp(policy)  # what the kernel reads: power-of-two sizes
    weights = sum(x.nbytes for x in jax.tree.leaves(policy) if isinstance(x, jax.Array))
    # State in and out once per launch; the weights once per program and launch.
    kernel = written + (2 * state + weights / block_envs) * launches / n
    # Outside the kernel, XLA turns the int8 flags into bools (a byte read, a byte written).
    epilogue = float(sum(2 for x in (traj.terminated, traj.truncated) if x is not None))
    return {"kernel": kernel, "epilogue": epilogue, "total": kernel + epilogue}


def xla_cost(compiled) -> dict[str, float | None]:
    try:
        cost = compiled.cost_analysis()
    except Exception:  # cost analysis is best effort: some backends report none
        return {"bytes": None, "flops": None}
    if isinstance(cost, list | tuple):
        cost = cost[0] if cost else {}
    cost = cost or {}
    return {"bytes": cost.get("bytes accessed"), "flops": cost.get("flops")}
