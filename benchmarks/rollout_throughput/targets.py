"""The throughput suite's targets (CartPole-v1 at N = 4096), evaluated on a run's records."""

from __future__ import annotations

from typing import Any

from benchmarks.rollout_throughput.config import ENV_ID

TARGET_NUM_ENVS = 4096
MEMORY_FLOOR = "memory_floor"
# (name, numerator, denominator, bound, "min" | "max"); CartPole. The denominator is another
# row (a same-run ratio; physics_only is the compute floor), MEMORY_FLOOR (the numerator's
# fraction of its memory floor, `floor.py`) or None (compile seconds).
TARGETS = (
    ("jaxsim / gymnasium_numpy", "jaxsim", "gymnasium_numpy", 3.0, "min"),
    ("jaxsim / gymnax", "jaxsim", "gymnax", 4.0, "min"),
    ("jaxsim of memory floor", "jaxsim", MEMORY_FLOOR, 0.6, "min"),
    # The same two for the "all" rollout written into the previous call's buffers (out=).
    ("jaxsim_reuse / gymnasium_numpy", "jaxsim_reuse", "gymnasium_numpy", 3.0, "min"),
    ("jaxsim_reuse of memory floor", "jaxsim_reuse", MEMORY_FLOOR, 0.6, "min"),
    (
        "jaxsim_rewards of compute floor (physics_only)",
        "jaxsim_rewards",
        "physics_only",
        0.8,
        "min",
    ),
    ("jaxsim compile seconds", "jaxsim", None, 1.0, "max"),
)


def find(records, impl: str, num_envs: int, env_id: str = ENV_ID) -> dict[str, Any] | None:
    for r in records:
        if (
            r["impl"] == impl
            and r["num_envs"] == num_envs
            and r.get("env_id", ENV_ID) == env_id
            and r["status"] == "ok"
        ):
            return r
    return None


def evaluate_targets(records) -> list[dict[str, Any]]:
    out = []
    for name, num, den, bound, kind in TARGETS:
        row: dict[str, Any] = {
            "name": name,
            "env_id": ENV_ID,
            "num_envs": TARGET_NUM_ENVS,
            kind: bound,
        }
        a = find(records, num, TARGET_NUM_ENVS)
        b = find(records, den, TARGET_NUM_ENVS) if den not in (None, MEMORY_FLOOR) else None
        if (
            a is None
            or (den not in (None, MEMORY_FLOOR) and b is None)
            or (den is None and a["compile_s"] is None)
            or (den == MEMORY_FLOOR and "floor" not in a)
        ):
            out.append({**row, "value": None, "pass": None, "status": "not measured"})
            continue
        if den == MEMORY_FLOOR:
            floor = a["floor"]["steps_per_s"]
            value = a["floor"]["fraction"]
            value_range = [a["steps_per_s"]["min"] / floor, a["steps_per_s"]["max"] / floor]
        elif den is None:
            value, value_range = a["compile_s"], None
            # Wall-clock compile time grows with load from other processes; CPU time less so.
            row["first_call_cpu_s"] = a["first_call_cpu_s"]
        else:
            ra, rb = a["steps_per_s"], b["steps_per_s"]
            value = ra["median"] / rb["median"]
            # Worst and best pairing of the repeats: how far load noise could move the ratio.
            value_range = [ra["min"] / rb["max"], ra["max"] / rb["min"]]
        ok = value >= bound if kind == "min" else value < bound
        out.append(
            {
                **row,
                "value": value,
                "range": value_range,
                "pass": ok,
                "status": "pass" if ok else "fail",
            }
        )
    return out
