"""Recorded outputs against free memory: a rollout that cannot fit is refused before it runs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim.core import Env
from jaxsim.policies import OpenLoopPolicy, split_policy_output
from jaxsim.transition import OUTPUT_PRESETS


def _step_bytes(env: Env, num_envs: int) -> dict[str, int]:
    """Bytes one step of each per-step output takes for `num_envs` environments (no extras)."""
    params = env.default_params
    obs = int(np.prod(env.observation_space(params).shape)) * 4
    space = env.action_space(params)
    per_env = dict(
        obs=obs,
        action=int(np.prod(space.shape)) * 4,
        reward=4,
        terminated=1,
        truncated=1,
        next_obs=obs,
        episode_return=4,
        episode_length=4,
    )
    return {name: b * num_envs for name, b in per_env.items()}


def _extras_bytes(env: Env, policy, key, num_envs: int) -> int:
    """Bytes of one step of the policy's extras, from its traced output shapes."""
    if isinstance(policy, OpenLoopPolicy):
        return 0
    shape = (num_envs, *env.observation_space(env.default_params).shape)
    obs = jax.ShapeDtypeStruct(shape, jnp.float32)
    out = jax.eval_shape(lambda k, o: split_policy_output(policy(k, o))[1], key, obs)
    return sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(out))


def _available_bytes() -> int | None:
    """Memory the recorded outputs can take: the device's free memory, or the host's."""
    device = jax.devices()[0]
    stats = device.memory_stats() if device.platform != "cpu" else None
    if stats and "bytes_limit" in stats:
        return stats["bytes_limit"] - stats.get("bytes_in_use", 0)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _gb(x: float) -> str:
    return f"{x / 1e9:.3g} GB"


def check_memory(env: Env, policy, key, n: int, num_envs: int, outputs) -> None:
    """Refuses, before any work, a rollout whose recorded outputs would not fit in memory."""
    available = _available_bytes()
    if available is None:
        return
    per_step = _step_bytes(env, num_envs)

    def need(names) -> int:
        return n * sum(per_step.get(name, 0) for name in names)

    # A policy's extras are traced only for rollouts big enough for them to matter.
    if "extras" in outputs and need(outputs) > available // 8:
        per_step["extras"] = _extras_bytes(env, policy, key, num_envs)
    if need(outputs) <= available:
        return
    fits = [
        f"{name!r} ({_gb(need(names))})"
        for name, names in OUTPUT_PRESETS.items()
        if need(names) <= available
    ]
    raise MemoryError(
        f"rollout: outputs={_outputs_name(outputs)} records {_gb(need(outputs))} for n={n} steps "
        f"of num_envs={num_envs}, but {jax.devices()[0].platform} has {_gb(available)} free. "
        f"Presets that fit: {', '.join(fits) or 'none'}; or fewer steps per call, continuing "
        "with state=out.final_state"
    )


def _outputs_name(outputs) -> str:
    for name, names in OUTPUT_PRESETS.items():
        if tuple(names) == tuple(outputs):
            return repr(name)
    return repr(list(outputs))
