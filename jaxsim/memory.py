"""A rollout's memory (env state, params, outputs) against free memory, checked before it runs."""

from __future__ import annotations

import functools

import jax
import numpy as np

from jaxsim.core import Env
from jaxsim.policies import OpenLoopPolicy, split_policy_output
from jaxsim.trajectory import OUTPUT_PRESETS


def _step_bytes(env: Env, num_envs: int) -> dict[str, int]:
    """Bytes one step of each per-step output takes for `num_envs` environments (no extras)."""
    params = env.default_params
    obs = _obs_bytes(env.observation_space(params))
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
    space = env.observation_space(env.default_params)
    obs = jax.ShapeDtypeStruct((num_envs, *space.shape), space.dtype)
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


@functools.lru_cache(maxsize=256)
def _state_bytes(env: Env) -> int:
    """Bytes of one environment's rollout carry: its env state, observation and episode totals.

    From abstract shapes (`jax.eval_shape`): nothing of the batch's size is allocated. Once per
    environment (equal environments hash equal): tracing `init_state` on every call was most
    of a small rollout's cost (CartPole, one step: 1.3-1.9 ms a call).
    """
    params = env.default_params
    state = jax.eval_shape(env.init_state, env.reset_draw_shapes(), params)
    obs = _obs_bytes(env.observation_space(params))
    return _tree_bytes(state) + obs + 4 + 4


def _obs_bytes(space) -> int:
    """One environment's observation: float32 (4 bytes a component) or bool cells (1 byte)."""
    return int(np.prod(space.shape)) * np.dtype(space.dtype).itemsize


def _tree_bytes(tree) -> int:
    return sum(int(np.size(x)) * np.dtype(_dtype(x)).itemsize for x in jax.tree.leaves(tree))


def _dtype(x):
    dtype = getattr(x, "dtype", None)
    if dtype is not None:  # jax keeps 32-bit values unless x64 is on
        return jax.dtypes.canonicalize_dtype(dtype)
    return np.int32 if isinstance(x, int) else np.float32


def check_memory(
    env: Env, policy, key, n: int, num_envs: int, outputs, params=None, state_given=False
) -> None:
    """Refuses, before any work, a rollout whose memory would not fit in what is free.

    Counted: the batch's env state twice (a step reads one and writes the next; a `state=`
    given already lies in memory and counts once more for the one the rollout returns), the
    params (per-environment leaves are [num_envs, ...]), and the recorded outputs.
    """
    available = _available_bytes()
    if available is None:
        return
    per_step = _step_bytes(env, num_envs)

    def recorded(names) -> int:
        return n * sum(per_step.get(name, 0) for name in names)

    state = _state_bytes(env) * num_envs * (1 if state_given else 2)
    params_bytes = _tree_bytes(env.default_params if params is None else params)
    fixed = state + params_bytes

    # A policy's extras are traced only for rollouts big enough for them to matter.
    if "extras" in outputs and fixed + recorded(outputs) > available // 8:
        per_step["extras"] = _extras_bytes(env, policy, key, num_envs)
    total = fixed + recorded(outputs)
    if total <= available:
        return
    fits = [
        f"{name!r} ({_gb(recorded(names))})"
        for name, names in OUTPUT_PRESETS.items()
        if fixed + recorded(names) <= available
    ]
    most = int(available // (total / num_envs))
    raise MemoryError(
        f"rollout: n={n} steps of num_envs={num_envs} {env.id} environments need "
        f"{_gb(total)}: env state {_gb(state)}, params {_gb(params_bytes)}, and "
        f"outputs={_outputs_name(outputs)} records {_gb(recorded(outputs))}; but "
        f"{jax.devices()[0].platform} has {_gb(available)} free. What fits: "
        f"num_envs <= {most} as asked; presets that fit: {', '.join(fits) or 'none'}; or "
        "fewer steps per call, continuing with state=out.final_state"
    )


def _outputs_name(outputs) -> str:
    for name, names in OUTPUT_PRESETS.items():
        if tuple(names) == tuple(outputs):
            return repr(name)
    return repr(list(outputs))
