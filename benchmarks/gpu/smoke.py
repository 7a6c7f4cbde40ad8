"""The GPU check's smoke phase: one small fused kernel per environment family, checked and timed.

Usage:
  python -m benchmarks.gpu.smoke --out smoke.json --budget-s 140   # on a GPU
  python -m benchmarks.gpu.smoke --dry-run --out smoke.json        # on a CPU: the plumbing

Families, each under a uniform random policy: classic control (CartPole-v1), the Swarm (16
particles), MinAtar (Breakout). Per family, in order, each step started only within --budget-s:
  lower  (--dry-run only) the GPU-sized kernel lowered, not compiled, for CUDA inside an abstract
         H200 mesh (`benchmarks.gpu.lowering`): the Triton lowering, with no GPU;
  check  fused against scan at a small ragged size, every output kept (`benchmarks.fusion`'s
         check: integers and flags identical, floats within 1e-5 relative);
  scan, fused  rollouts keeping rewards, timed by `benchmarks.fusion.measure` (compile apart,
         warm-up discarded, median of 3).
On a CPU (--dry-run) the kernel runs in Pallas interpret mode at tiny sizes: its times are the
cost of checking, not speeds. Exit status 1 if a step failed or was not reached.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import jax

import jaxsim
from benchmarks.fusion import measure as fusion
from benchmarks.gpu.lowering import TRITON_CALL, lower_for_cuda
from benchmarks.harness.formatting import format_rate, format_table
from benchmarks.harness.provenance import provenance
from benchmarks.harness.record import append_jsonl, finish
from jaxsim import FusedConfig


@dataclasses.dataclass(frozen=True)
class Family:
    """One environment family's representative and its kernel's block on a GPU."""

    name: str
    env_id: str
    make_kwargs: tuple[tuple[str, Any], ...] = ()  # static config for `jaxsim.make`
    block_envs: int = 256  # environments per program on a GPU

    def make(self):
        return jaxsim.make(self.env_id, **dict(self.make_kwargs))


FAMILIES = (
    Family("classic", "CartPole-v1"),
    # 16 particles: 324 bytes of state per environment, a [128, 16] block per field.
    Family("swarm", "Swarm-v0", (("num_particles", 16),), block_envs=128),
    Family("minatar", "MinAtar/Breakout-v0", block_envs=128),
)


@dataclasses.dataclass(frozen=True)
class Sizes:
    """A run's sizes: the timed rollouts', then the check's (ragged: not a multiple of the block
    or of K)."""

    num_envs: int
    steps: int
    k: int  # steps per kernel launch
    max_block: int  # caps each family's block_envs
    check_envs: int
    check_steps: int
    min_time: float  # seconds per timing sample, at least


GPU = Sizes(num_envs=2**16, steps=64, k=16, max_block=256, check_envs=300, check_steps=37,
            min_time=0.05)  # fmt: skip
CPU = Sizes(num_envs=16, steps=4, k=2, max_block=8, check_envs=11, check_steps=5, min_time=0.0)
STEPS = ("lower", "check", "scan", "fused")


def lower(family: Family) -> dict[str, Any]:
    """The kernel at the GPU's sizes lowered for CUDA (Triton) without a GPU."""
    env = family.make()
    config = FusedConfig(family.block_envs, steps_per_launch=GPU.k, interpret=False)

    def run(key):
        return jaxsim.rollout(
            env, "random", GPU.steps, num_envs=GPU.num_envs, key=key, outputs="rewards",
            backend="fused", fused_config=config,
        )  # fmt: skip

    try:
        text = lower_for_cuda(run, jax.random.key(0)).as_text()
    except Exception as e:
        return {"status": "failed", "reason": f"{type(e).__name__}: {e}"[:2000]}
    ok = TRITON_CALL in text
    return {"status": "ok" if ok else "failed", "triton_calls": text.count(TRITON_CALL)}


def run_family(family: Family, sizes: Sizes, dry_run: bool, over_budget) -> dict[str, Any]:
    """One family's steps; each is a dict with a "status" (ok, failed, skipped)."""
    block = min(family.block_envs, sizes.max_block)
    cfg = fusion.Config(
        envs=(family.env_id,), num_envs=(sizes.num_envs,), ks=(sizes.k,), policies=("random",),
        outputs=("rewards",), steps=sizes.steps, block_envs=block, repeats=3,
        min_time=sizes.min_time, budget_s=math.inf, check_num_envs=sizes.check_envs,
        check_steps=sizes.check_steps,
    )  # fmt: skip
    on_gpu = jax.default_backend() == "gpu"
    row: dict[str, Any] = dict(family=family.name, env_id=family.env_id, block_envs=block)
    row["make_kwargs"] = dict(family.make_kwargs)
    for step in STEPS:
        if step == "lower" and not dry_run:
            continue  # on a GPU the compile below lowers it
        if over_budget():
            row[step] = {"status": "skipped", "reason": "not reached within --budget-s"}
        elif step == "lower":
            row[step] = lower(family)
        elif step == "check":
            check = fusion.run_check(family.make(), "random", "all", sizes.k, cfg)
            row[step] = {**check, "status": "ok" if check["pass"] else "failed"}
        else:
            k = None if step == "scan" else sizes.k
            kwargs = dict(family.make_kwargs)
            row[step] = fusion.measure(
                family.env_id, "random", "rewards", sizes.num_envs, k, cfg, on_gpu, kwargs
            )
    rates = [row.get(s, {}).get("steps_per_s", {}).get("median") for s in ("scan", "fused")]
    row["fused_over_scan"] = rates[1] / rates[0] if all(rates) else None
    return row


def _cell(step: dict[str, Any] | None) -> str:
    if step is None:
        return ""
    if step["status"] != "ok":
        return step["status"]
    rate = step.get("steps_per_s", {}).get("median")
    return format_rate(rate) if rate else "ok"


def render(rows: list[dict[str, Any]]) -> str:
    table = []
    for r in rows:
        ratio = r["fused_over_scan"]
        compile_s = (r.get("fused") or {}).get("compile_s")
        table.append([
            r["family"], r["env_id"], *(_cell(r.get(s)) for s in STEPS),
            "–" if ratio is None else f"{ratio:.2f}x",
            "–" if compile_s is None else f"{compile_s:.1f}",
        ])  # fmt: skip
    headers = ["family", "env", *STEPS[:2], "scan steps/s", "fused steps/s", "fused/scan"]
    return format_table([*headers, "fused compile s"], table)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu.smoke", description=__doc__)
    p.add_argument("--out", type=Path, required=True, help="JSON record")
    p.add_argument("--budget-s", type=float, default=math.inf, help="start no step after this")
    p.add_argument("--dry-run", action="store_true", help="a CPU: lower for CUDA, tiny sizes")
    args = p.parse_args(argv)
    started = time.perf_counter()
    sizes = CPU if args.dry_run else GPU
    prov = provenance()
    print(f"GPU check smoke on {prov['device_kind']} ({'dry run' if args.dry_run else 'GPU'})")
    partial = args.out.with_name(args.out.stem + ".partial.jsonl")
    partial.unlink(missing_ok=True)

    def over_budget() -> bool:
        return time.perf_counter() - started > args.budget_s

    rows = []
    for family in FAMILIES:
        rows.append(run_family(family, sizes, args.dry_run, over_budget))
        append_jsonl(partial, rows[-1])
        steps = {s: rows[-1][s]["status"] for s in STEPS if s in rows[-1]}
        print(f"  {family.name} {family.env_id}: {steps}", flush=True)
    result = {
        "benchmark": "gpu_smoke",
        "dry_run": args.dry_run,
        "interpret_mode": jax.default_backend() != "gpu",
        "sizes": dataclasses.asdict(sizes),
        "provenance": prov,
        "wall_s": round(time.perf_counter() - started, 1),
        "families": rows,
    }
    failed = [
        f"{r['family']} {s}: {r[s]['status']}"
        for r in rows
        for s in STEPS
        if s in r and r[s]["status"] != "ok"
    ]
    return finish(result, args.out, render(rows), failed, partial)


if __name__ == "__main__":
    raise SystemExit(main())
