"""Scan vs fused rollouts: env-steps/s, bytes per env-step and % of the memory and compute floors.

Usage:
  python -m benchmarks.fusion.measure                # full grid: 5 envs, N = 2^10..2^20, K = 1..256
  python -m benchmarks.fusion.measure --quick       # CartPole, N in {2^14, 2^20}, K in {1, 16, 256}
  python -m benchmarks.fusion.measure --envs CartPole-v1 --num-envs 1024,1048576 --k 1,16,256 \\
      --policies random,mlp --outputs stats,rewards,all --steps 256 --out fusion.json

For each environment, policy (uniform random; an MLP actor-critic with two hidden layers of 64)
and output selection (`rollout(..., outputs=...)`), it first checks the fused backend against
the scan backend at a small ragged size (ints and flags identical, floats within 1e-5 relative),
then times both at each num_envs: `--steps` steps per call, a new key per call, compile timed
apart, warm-up discarded, median of `--repeats` samples of at least `--min-time` seconds.

Bytes per env-step: for the scan, XLA's cost analysis of the compiled rollout; for the fused
kernel, its inputs and outputs (state read and written once per launch, one row per step of
each kept output, open-loop actions, weights once per program and launch) plus the XLA
epilogue that turns its columns into the `Trajectory` layout. Floors: % of the H200's measured
copy bandwidth (4.3 TB/s) and fp32 peak (67 TFLOP/s; work counted as XLA's flop count for the
scan), on a GPU only. On a CPU the kernel runs in Pallas interpret mode: those figures are the
cost of checking it there, not a speed.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import os
import time
import traceback
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jaxsim
from benchmarks.fusion.traffic import (
    H200_BANDWIDTH,
    H200_FP32_FLOPS,
    kernel_bytes_per_step,
    xla_cost,
)
from benchmarks.harness.arguments import int_list, name_list
from benchmarks.harness.formatting import format_rate
from benchmarks.harness.provenance import provenance
from benchmarks.harness.record import append_jsonl, default_out, finish
from benchmarks.harness.timing import time_fn
from jaxsim import FusedConfig, OpenLoopPolicy

ENV_IDS = (
    "CartPole-v1",
    "Pendulum-v1",
    "MountainCar-v0",
    "MountainCarContinuous-v0",
    "Acrobot-v1",
)
FULL_NUM_ENVS = tuple(2**p for p in range(10, 21, 2))
FULL_K = (1, 4, 16, 64, 256)
QUICK_NUM_ENVS = (2**14, 2**20)
QUICK_K = (1, 16, 256)
CPU_NUM_ENVS = (2**10,)  # interpret mode: a correctness cost, kept small
CPU_K = (4, 16)
# (name, policy, bound, "ratio" to scan | "rate"): CartPole at the largest num_envs, best K, for
# each output selection measured.
TARGETS = (
    ("fused / scan, CartPole random", "random", 10.0, "ratio"),
    ("fused env-steps/s, CartPole random", "random", 1e11, "rate"),
    ("fused / scan, CartPole MLP", "mlp", 3.0, "ratio"),
)


@dataclasses.dataclass(frozen=True)
class Config:
    envs: tuple[str, ...]
    num_envs: tuple[int, ...]
    ks: tuple[int, ...]
    policies: tuple[str, ...]
    outputs: tuple[str, ...]
    steps: int
    block_envs: int
    repeats: int
    min_time: float
    budget_s: float
    check_num_envs: int = 300  # not a multiple of the block: the ragged path
    check_steps: int = 37  # not a multiple of most K: a shorter last launch


def _policy(kind: str, env, n: int = 0, num_envs: int = 0):
    """random, mlp (two hidden layers of 64, with a critic) or open_loop ([n, num_envs] actions)."""
    if kind == "random":
        return jaxsim.random_policy(env)
    if kind == "mlp":
        return jaxsim.init_mlp_policy(jax.random.key(0), env, hidden=(64, 64), critic=True)
    space = env.action_space(env.default_params)
    bits = jax.random.bits(jax.random.key(1), (n, num_envs, *space.shape), jnp.uint32)
    actions = space.from_bits(bits) if space.shape == () else space.from_bits(bits, bits ^ 1)
    return OpenLoopPolicy(actions)


def _rollout(env, policy, n, num_envs, key, outputs, k=None, block_envs=256):
    """The scan backend if k is None, else the fused one with K = k."""
    kw = dict(num_envs=num_envs, key=key, outputs=outputs, backend="scan")
    if k is not None:
        kw.update(backend="fused", fused_config=FusedConfig(block_envs, steps_per_launch=k))
    return jaxsim.rollout(env, policy, n, **kw)


# ----------------------------------------------------------------------------------- correctness
def check_against_scan(env, kind, outputs, k, cfg: Config) -> dict[str, Any]:
    """Fused vs scan at a small ragged size: identical ints and flags, floats within 1e-5."""
    n, num_envs, key = cfg.check_steps, cfg.check_num_envs, jax.random.key(2024)
    policy = _policy(kind, env, n, num_envs)
    scan = _rollout(env, policy, n, num_envs, key, outputs)
    fused = _rollout(env, policy, n, num_envs, key, outputs, k, min(cfg.block_envs, 128))
    worst_rel, int_mismatches = 0.0, 0
    for x, y in zip(jax.tree.leaves(scan), jax.tree.leaves(fused), strict=True):
        x, y = np.asarray(x), np.asarray(y)
        if np.issubdtype(x.dtype, np.floating):
            # Relative error, with values below 0.1 compared absolutely (to 1e-6).
            rel = np.abs(x - y) / np.maximum(np.abs(x), 0.1)
            worst_rel = max(worst_rel, float(rel.max(initial=0.0)))
        else:
            int_mismatches += int((x != y).sum())
    ok = worst_rel <= 1e-5 and int_mismatches == 0
    return {"pass": ok, "max_rel_err": worst_rel, "int_mismatches": int_mismatches}


# ----------------------------------------------------------------------------------------- points
def point(env_id, kind, outputs, num_envs, k) -> dict[str, Any]:
    backend = "scan" if k is None else "fused"
    return dict(
        env_id=env_id, policy=kind, outputs=outputs, num_envs=num_envs, backend=backend, k=k
    )


def point_name(r: dict[str, Any]) -> str:
    """ "CartPole-v1 random/stats N=1024 K=16": a point, in words."""
    return f"{r['env_id']} {r['policy']}/{r['outputs']} N={r['num_envs']} K={r['k']}"


def measure(
    env_id, kind, outputs, num_envs, k, cfg: Config, on_gpu: bool, make_kwargs=None
) -> dict[str, Any]:
    """One timed point: the scan backend if k is None, else the fused one with K = k.

    `make_kwargs` go to `jaxsim.make(env_id, ...)` (static config such as a size).
    """
    record = point(env_id, kind, outputs, num_envs, k)
    record.update(n=cfg.steps, block_envs=None if k is None else cfg.block_envs)
    env = jaxsim.make(env_id, **(make_kwargs or {}))
    policy = _policy(kind, env)
    n, seeds = cfg.steps, itertools.count(1)

    def run(key):
        return _rollout(env, policy, n, num_envs, key, outputs, k, cfg.block_envs)

    def verify(traj):
        if not bool(jnp.isfinite(traj.final_state.obs).all()):
            raise AssertionError("non-finite final observation")

    try:
        # Compiled ahead of time: compile time apart, and the timed calls cannot retrace.
        t0 = time.perf_counter()
        compiled = jax.jit(run).lower(jax.random.key(0)).compile()
        compile_s = time.perf_counter() - t0
        timing = time_fn(
            lambda: compiled(jax.random.key(next(seeds))),
            repeats=cfg.repeats,
            min_time=cfg.min_time,
            check=verify,
        )
    except Exception as e:
        traceback.print_exc()
        return {**record, "status": "failed", "reason": f"{type(e).__name__}: {e}"[:2000]}
    steps = n * num_envs
    rate = steps / np.asarray(timing.samples_s)
    xla = xla_cost(compiled)
    per_step = {name: (v / steps if v is not None else None) for name, v in xla.items()}
    bytes_per_step = per_step["bytes"]
    if k is not None:
        analytic = kernel_bytes_per_step(policy, timing.last, n, k, cfg.block_envs)
        record["kernel_bytes_per_step"] = analytic
        bytes_per_step = analytic["total"]
    median = steps / timing.median_s
    record.update(
        status="ok",
        interpret=k is not None and not on_gpu,
        steps_per_s={"median": median, "min": float(rate.min()), "max": float(rate.max())},
        compile_s=compile_s,
        first_call_s=timing.first_call_s,
        compiles_during_timing=timing.compiles_during_timing,
        xla_bytes_per_step=per_step["bytes"],
        xla_flops_per_step=per_step["flops"],
        bytes_per_step=bytes_per_step,
        timing=timing.to_dict(),
    )
    if on_gpu and bytes_per_step:
        record["pct_bandwidth_floor"] = 100 * bytes_per_step * median / H200_BANDWIDTH
    return record


def run_check(env, kind, outputs, k, cfg) -> dict[str, Any]:
    try:
        result = check_against_scan(env, kind, outputs, k, cfg)
    except Exception as e:
        result = {"pass": False, "reason": f"{type(e).__name__}: {e}"[:2000]}
    print(f"check {env.id}/{kind}/{outputs}/K={k}: {result}", flush=True)
    return result


def _add_compute_floor(records) -> None:
    """% of fp32 peak, counting each point's work as the scan's XLA flops per env-step."""
    flops = {
        (r["env_id"], r["policy"], r["outputs"], r["num_envs"]): r["xla_flops_per_step"]
        for r in records
        if r["status"] == "ok" and r["backend"] == "scan"
    }
    for r in records:
        f = flops.get((r["env_id"], r["policy"], r["outputs"], r["num_envs"]))
        if r["status"] == "ok" and f and "pct_bandwidth_floor" in r:
            r["pct_compute_floor"] = 100 * f * r["steps_per_s"]["median"] / H200_FP32_FLOPS


def evaluate_targets(records, cfg: Config) -> list[dict[str, Any]]:
    out = []
    n_max = max(cfg.num_envs)
    for name, kind, bound, what in TARGETS:
        for outputs in cfg.outputs:

            def ok_at(backend, kind=kind, outputs=outputs):
                return [
                    r for r in records
                    if r["status"] == "ok" and r["env_id"] == "CartPole-v1" and r["policy"] == kind
                    and r["outputs"] == outputs and r["num_envs"] == n_max
                    and r["backend"] == backend
                ]  # fmt: skip

            row = {"name": name, "outputs": outputs, "num_envs": n_max, "min": bound}
            fused, scan = ok_at("fused"), ok_at("scan")
            if not fused or (what == "ratio" and not scan):
                out.append({**row, "value": None, "pass": None, "status": "not measured"})
                continue
            best = max(fused, key=lambda r: r["steps_per_s"]["median"])
            value = best["steps_per_s"]["median"]
            if what == "ratio":
                value /= scan[0]["steps_per_s"]["median"]
            interpret = best["interpret"]
            ok = None if interpret else value >= bound
            status = "interpret mode: not a speed" if interpret else ("pass" if ok else "fail")
            out.append({**row, "value": value, "best_k": best["k"], "pass": ok, "status": status})
    return out


# ------------------------------------------------------------------------------------------ CLI
def parse_args(argv=None) -> tuple[Config, Path, bool]:
    on_gpu = jax.default_backend() == "gpu"
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.fusion.measure", description=__doc__.split("\n")[0]
    )
    p.add_argument("--quick", action="store_true", help="CartPole only, a small grid")
    envs = name_list(ENV_IDS, "environment(s)", all_means_every=False)
    policies = name_list(("random", "mlp"), "policy kind(s)", all_means_every=False)
    outputs = name_list(("stats", "rewards", "all"), "output set(s)", all_means_every=False)
    p.add_argument("--envs", type=envs, default=None)
    p.add_argument("--num-envs", type=int_list, default=None, help="comma-separated batch sizes")
    p.add_argument("--k", type=int_list, default=None, help="comma-separated steps per launch")
    p.add_argument("--policies", type=policies, default=("random", "mlp"))
    p.add_argument("--outputs", type=outputs, default=("stats", "rewards", "all"))
    p.add_argument("--steps", type=int, default=None, help="steps per rollout (default 256)")
    p.add_argument("--block-envs", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--min-time", type=float, default=None, help="seconds per sample")
    p.add_argument("--budget-s", type=float, default=math.inf, help="start no point after this")
    p.add_argument("--out", type=Path, default=None, help="JSON output path")
    p.add_argument(
        "--check-only",
        action="store_true",
        help="only check fused against scan: every --envs (default all) x random, mlp, open_loop",
    )
    a = p.parse_args(argv)
    if a.repeats < 3:
        p.error("--repeats must be >= 3 (a median of at least 3)")
    small = a.quick or not on_gpu
    grid = (QUICK_NUM_ENVS, QUICK_K) if a.quick else (FULL_NUM_ENVS, FULL_K)
    cfg = Config(
        envs=a.envs or (("CartPole-v1",) if small and not a.check_only else ENV_IDS),
        num_envs=a.num_envs or (CPU_NUM_ENVS if not on_gpu else grid[0]),
        ks=a.k or (CPU_K if not on_gpu else grid[1]),
        policies=a.policies,
        outputs=a.outputs,
        steps=a.steps or (256 if on_gpu else 16),
        block_envs=a.block_envs,
        repeats=a.repeats,
        min_time=a.min_time if a.min_time is not None else (0.2 if small else 0.5),
        budget_s=a.budget_s,
    )
    FusedConfig(block_envs=cfg.block_envs)  # reject a bad block size before running anything
    out = a.out or default_out("fusion", a.quick)
    return cfg, out, a.check_only


def main(argv=None) -> int:
    cfg, out, check_only = parse_args(argv)
    on_gpu = jax.default_backend() == "gpu"
    started = time.perf_counter()
    prov = provenance()
    partial = out.with_name(out.stem + ".partial.jsonl")
    partial.unlink(missing_ok=True)
    print(f"fusion benchmark on {prov['device_kind']}; commit {prov['commit']}", flush=True)
    if not on_gpu:
        print("no GPU: the fused kernel runs in interpret mode (a correctness cost, not a speed)")

    checks, records = {}, []
    # The check runs several launches and a shorter last one: any K > 1 tests the same code.
    check_k = min([k for k in cfg.ks if k > 1], default=4)
    if check_only:
        for env_id, kind in itertools.product(cfg.envs, ("random", "mlp", "open_loop")):
            name = f"{env_id}/{kind}/all/K={check_k}"
            checks[name] = run_check(jaxsim.make(env_id), kind, "all", check_k, cfg)
    for env_id, kind, outputs in itertools.product(cfg.envs, cfg.policies, cfg.outputs):
        if check_only:
            break
        name = f"{env_id}/{kind}/{outputs}/K={check_k}"
        checks[name] = run_check(jaxsim.make(env_id), kind, outputs, check_k, cfg)
        for num_envs in cfg.num_envs:
            for k in (None, *cfg.ks):
                if time.perf_counter() - started > cfg.budget_s:
                    r = point(env_id, kind, outputs, num_envs, k)
                    r.update(status="skipped", reason="over --budget-s")
                else:
                    r = measure(env_id, kind, outputs, num_envs, k, cfg, on_gpu)
                    r["loadavg_1min_after"] = round(os.getloadavg()[0], 2)
                records.append(r)
                append_jsonl(partial, r)
                note = (
                    f"{format_rate(r['steps_per_s']['median'])} env-steps/s"
                    if r["status"] == "ok"
                    else f"{r['status']}: {r['reason'][:200]}"
                )
                print(f"  {env_id} {kind} {outputs} N={num_envs} K={k}: {note}", flush=True)

    _add_compute_floor(records)
    targets = evaluate_targets(records, cfg)
    result = {
        "benchmark": "fusion",
        "unit": "env-steps/s",
        "interpret_mode": not on_gpu,
        "floors": {"bandwidth_bytes_per_s": H200_BANDWIDTH, "fp32_flops_per_s": H200_FP32_FLOPS},
        "provenance": prov,
        "config": dataclasses.asdict(cfg),
        "wall_s": round(time.perf_counter() - started, 1),
        "checks": checks,
        "targets": targets,
        "results": records,
    }
    failed = [point_name(r) for r in records if r["status"] == "failed"]
    failed += [f"check {name}" for name, c in checks.items() if not c["pass"]]
    return finish(result, out, None, failed, partial)


if __name__ == "__main__":
    raise SystemExit(main())
