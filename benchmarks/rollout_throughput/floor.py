"""A rollout's memory floor: the bytes an env-step must move over the copy bandwidth."""

from __future__ import annotations

import statistics
import time
from typing import Any

import jax
import numpy as np

import jaxsim

# Which rows have a memory floor, and what each keeps per step: a jaxsim outputs= preset, or
# "physics" (the env state alone: the physics-only row records nothing).
FLOOR_MODES = {
    "jaxsim": "all",
    "jaxsim_reuse": "all",
    "jaxsim_rewards": "rewards",
    "physics_only": "physics",
}
# Large enough to leave every cache level behind (tens of MB of last-level cache at most).
COPY_BYTES = 2**27


def _nbytes(tree) -> int:
    return sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(tree))


def step_bytes(env_id: str, mode: str) -> dict[str, int]:
    """Bytes one env-step reads and writes at the least, from the traced shapes of the rollout.

    A rollout step reads its carried state and writes it back (the env state, plus for a
    rollout the current observation and episode accumulators), and writes each per-step output
    `mode` keeps. Shapes and dtypes come from `jax.eval_shape` of one step of one environment,
    so they follow the env and the outputs preset as they change. Parameters (shared, a few
    bytes per batch) are left out.
    """
    if mode not in (*FLOOR_MODES.values(),):
        raise ValueError(f"step_bytes: mode must be one of {sorted(set(FLOOR_MODES.values()))}")
    env = jaxsim.make(env_id)
    if mode == "physics":
        state = jax.eval_shape(lambda: env.reset(jax.random.key(0), env.default_params)[0])
        outputs = 0
    else:
        traj = jax.eval_shape(
            lambda: jaxsim.rollout(
                env, "random", 1, num_envs=1, key=jax.random.key(0), backend="scan", outputs=mode
            )
        )
        # next_key is read once per rollout (a continuation's key), not per step.
        state = traj.final_state.replace(next_key=None)
        # Leaves with leading [n=1, num_envs=1]: the step's records. final_state is the carry;
        # stats and checks are per call, not per step.
        per_step = traj.replace(final_state=None, stats=None, checks=None)
        outputs = _nbytes(per_step)
    state_bytes = _nbytes(state)
    return {
        "state_read": state_bytes,
        "state_written": state_bytes,
        "outputs_written": outputs,
        "total": 2 * state_bytes + outputs,
    }


def copy_bandwidth(repeats: int = 7, nbytes: int = COPY_BYTES) -> dict[str, Any]:
    """This machine's memory copy bandwidth: bytes read plus bytes written per second.

    `np.copyto` between two `nbytes` arrays whose pages are already mapped (as a rollout's
    reused buffers are), the median of `repeats` copies; read + written counts 2 * nbytes.
    """
    if repeats < 1:
        raise ValueError(f"copy_bandwidth: repeats must be >= 1, got {repeats}")
    src = np.ones(nbytes // 4, np.float32)
    dst = np.zeros_like(src)
    np.copyto(dst, src)  # warm: pages mapped, code paths taken
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        samples.append(2 * nbytes / (time.perf_counter() - t0))
    if not np.array_equal(dst[:: 1 << 16], src[:: 1 << 16]):
        raise AssertionError("copy_bandwidth: the copy did not land")
    return {
        "bytes_per_s": statistics.median(samples),
        "samples": samples,
        "method": f"np.copyto of {nbytes >> 20} MiB into a mapped buffer; read + written bytes",
    }


def merged_bandwidth(measured: list[dict[str, Any]]) -> dict[str, Any]:
    """One bandwidth from several `copy_bandwidth` runs (start and end of a suite run)."""
    samples = [x for m in measured for x in m["samples"]]
    return {
        "bytes_per_s": statistics.median(samples),
        "samples": samples,
        "method": measured[0]["method"] + f"; median over {len(measured)} runs",
    }


def add_floors(records: list[dict[str, Any]], bandwidth: float) -> None:
    """Puts a `floor` (bytes per step, floor env-steps/s, the figure's fraction of it) in each
    ok record of a row that has one; other rows are left without."""
    cache: dict[tuple[str, str], dict[str, int]] = {}
    for r in records:
        mode = FLOOR_MODES.get(r["impl"])
        if mode is None or r["status"] != "ok":
            continue
        key = (r["env_id"], mode)
        if key not in cache:
            cache[key] = step_bytes(*key)
        floor_rate = bandwidth / cache[key]["total"]
        r["floor"] = {
            "mode": mode,
            "bytes_per_step": cache[key],
            "steps_per_s": floor_rate,
            "fraction": r["steps_per_s"]["median"] / floor_rate,
        }
