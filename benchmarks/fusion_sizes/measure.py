"""Fusion against simulator size: scan vs fused env-steps/s on Swarm-v0 as its state grows.

Usage:
  python -m benchmarks.fusion_sizes.measure  # N = 1 ... 1024 particles (24 B to 20 KB)
  python -m benchmarks.fusion_sizes.measure --sizes 1,64,1024 --num-envs 65536 --steps 128 \\
      --k 16,128 --outputs rewards,all --budget-s 240 --out sizes.json

For each number of particles N (state: 20 N + 4 bytes per environment) and output selection, it
checks the fused backend against the scan at a small ragged size (`benchmarks.fusion`'s check),
then times both (`benchmarks.fusion.measure`: compile apart, median of repeats). Blocks shrink as
N grows (`block_envs(N)`: at most `--max-block-elems` particles per field and program) so a
program's state stays a few thousand values.

Traffic model (from shapes and dtypes, not from XLA's cost analysis, which counts a loop body
once and whole buffers): per env-step the scan reads and writes the carried state (environment
state, episode return and length) and writes the kept outputs; the fused kernel writes the same
outputs but moves the state once per launch of K steps (`benchmarks.fusion`'s kernel model).
Memory-bound on the H200's 4.3 TB/s, each predicts env-steps/s = bandwidth / bytes, and fused /
scan = scan bytes / fused bytes. On a CPU the kernel runs in Pallas interpret mode: its times
are a correctness cost, not a speed, and only the model speaks for a GPU. Whether [block, N]
state compiles without spilling registers at 4 KB+ per environment is a GPU measurement.

Writes the JSON record (provenance beside every number) and, with matplotlib, a PNG of the
predicted and measured fused/scan ratios against state bytes, beside the published claim
(arXiv 2207.07736: 11.3x on cartpole, up to 1024x as the simulator's memory traffic grows).
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path
from typing import Any

import jax

import jaxsim
from benchmarks.fusion import measure as fusion
from benchmarks.fusion.traffic import H200_BANDWIDTH, env_bytes, kernel_bytes_per_step, step_bytes
from benchmarks.fusion_sizes.suite import PUBLISHED, plot_sizes
from benchmarks.harness.arguments import int_list, name_list
from benchmarks.harness.formatting import format_rate
from benchmarks.harness.provenance import provenance
from benchmarks.harness.record import append_jsonl, default_out, finish

ENV_ID = "Swarm-v0"
SIZES = (1, 4, 16, 64, 256, 1024)


def block_envs(size: int, cap: int, max_elems: int) -> int:
    """Environments per program: `cap`, fewer as N grows (a power of two, at least 1)."""
    return max(1, min(cap, max_elems // size))


# ------------------------------------------------------------------------------- traffic model
def traffic_model(env, outputs: str, n: int, ks, block: int) -> dict[str, Any]:
    """Bytes per env-step of the scan and of the fused kernel (per K) for a random policy."""
    policy = jaxsim.random_policy(env)

    def run(key):
        return jaxsim.rollout(env, policy, n, num_envs=block, key=key, outputs=outputs)

    traj = jax.eval_shape(run, jax.random.key(0))  # shapes and dtypes only: nothing runs
    kept = [getattr(traj, f) for f in jaxsim.STEP_OUTPUTS if getattr(traj, f) is not None]
    written = sum(step_bytes(leaf) for leaf in jax.tree.leaves(kept))
    fs = traj.final_state
    carried = sum(env_bytes(x) for x in jax.tree.leaves(fs.env_state))
    carried += env_bytes(fs.episode_return) + env_bytes(fs.episode_length)
    state = sum(env_bytes(x) for x in jax.tree.leaves(fs.env_state))
    scan = written + 2 * carried  # every step: state in, state out, outputs out
    fused = {k: kernel_bytes_per_step(policy, traj, n, k, block)["total"] for k in ks}
    bw = H200_BANDWIDTH
    return {
        "state_bytes_per_env": state,
        "output_bytes_per_step": written,
        "scan_bytes_per_step": scan,
        "fused_bytes_per_step": fused,
        "predicted_h200_steps_per_s": {"scan": bw / scan, **{k: bw / b for k, b in fused.items()}},
        "predicted_ratio": {k: scan / b for k, b in fused.items()},
    }


# The MinAtar games (issue 21): native, kernel-capable, their observations grids of 0/1 cells.
MINATAR_IDS = (
    "MinAtar/Breakout-v0",
    "MinAtar/Asterix-v0",
    "MinAtar/Freeway-v0",
    "MinAtar/SpaceInvaders-v0",
    "MinAtar/Seaquest-v0",
)


def minatar_traffic(
    outputs: str, n: int, ks, block: int, env_ids=MINATAR_IDS
) -> list[dict[str, Any]]:
    """`traffic_model` of each MinAtar game, from shapes only (nothing runs). The kernel writes
    a grid as its packed row words (10 C float32 columns, `jaxsim.envs.minatar._grid.words`),
    which XLA then reads and unpacks into the [10, 10, C] bool cells outside it: per kept
    grid, the fused figure adds those 2 x 40 C bytes to the cells' 100 C."""
    rows = []
    for env_id in env_ids:
        env = jaxsim.make(env_id)
        model = traffic_model(env, outputs, n, ks, block)
        grids = len(kept_obs(outputs))
        words = 2 * 4 * 10 * env.num_channels * grids
        model["fused_bytes_per_step"] = {
            k: b + words for k, b in model["fused_bytes_per_step"].items()
        }
        fused = model["fused_bytes_per_step"]
        scan, bw = model["scan_bytes_per_step"], H200_BANDWIDTH
        model["predicted_h200_steps_per_s"] = {
            "scan": bw / scan,
            **{k: bw / b for k, b in fused.items()},
        }
        model["predicted_ratio"] = {k: scan / b for k, b in fused.items()}
        rows.append(
            {"env_id": env_id, "channels": env.num_channels, "outputs": outputs, "model": model}
        )
    return rows


def kept_obs(outputs: str) -> tuple[str, ...]:
    """The grid-valued fields an output selection keeps."""
    return {"all": ("obs", "next_obs")}.get(outputs, ())


# -------------------------------------------------------------------------------------- the run
def run_size(size, outputs, args, on_gpu, started) -> dict[str, Any]:
    env = jaxsim.make(ENV_ID, num_particles=size)
    block = block_envs(size, args.block_envs, args.max_block_elems)
    cfg = fusion.Config(
        envs=(ENV_ID,), num_envs=(args.num_envs,), ks=args.k, policies=("random",),
        outputs=(outputs,), steps=args.steps, block_envs=block, repeats=args.repeats,
        min_time=args.min_time, budget_s=args.budget_s, check_num_envs=block + 3,
        check_steps=min(args.k) + 3,
    )  # fmt: skip
    row = dict(num_particles=size, outputs=outputs, block_envs=block)
    row["model"] = traffic_model(env, outputs, args.steps, args.k, block)
    row["check"] = fusion.run_check(env, "random", outputs, min(args.k), cfg)
    points = []
    for k in (None, *args.k):
        if time.perf_counter() - started > args.budget_s:
            r = dict(fusion.point(ENV_ID, "random", outputs, args.num_envs, k), status="skipped")
            r["reason"] = "over --budget-s"
        else:
            kwargs = {"num_particles": size}
            r = fusion.measure(ENV_ID, "random", outputs, args.num_envs, k, cfg, on_gpu, kwargs)
            r["loadavg_1min_after"] = round(os.getloadavg()[0], 2)
        points.append(r)
        rate = r["steps_per_s"]["median"] if r["status"] == "ok" else None
        note = f"{format_rate(rate)} env-steps/s" if rate else f"{r['status']}"
        print(f"  N={size} {outputs} K={k} block={block}: {note}", flush=True)
    row["points"] = points
    ok = {p["k"]: p["steps_per_s"]["median"] for p in points if p["status"] == "ok"}
    fused = [v for k, v in ok.items() if k is not None]
    row["measured_ratio"] = max(fused) / ok[None] if fused and None in ok else None
    row["interpret"] = not on_gpu
    return row


def parse_args(argv=None):
    on_gpu = jax.default_backend() == "gpu"
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.fusion_sizes.measure", description=__doc__.split("\n")[0]
    )
    p.add_argument("--sizes", type=int_list, default=SIZES, help="particles, powers of two")
    outputs = name_list(("stats", "rewards", "all"), "output set(s)", all_means_every=False)
    p.add_argument("--outputs", type=outputs, default=("rewards", "all"))
    p.add_argument("--num-envs", type=int, default=2**16 if on_gpu else 256)
    p.add_argument("--steps", type=int, default=128 if on_gpu else 16)
    p.add_argument("--k", type=int_list, default=(128,) if on_gpu else (16,))
    p.add_argument("--block-envs", type=int, default=256, help="environments per program, at most")
    p.add_argument(
        "--max-block-elems", type=int, default=2048, help="particles per field and program"
    )
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--min-time", type=float, default=0.2, help="seconds per sample")
    p.add_argument("--budget-s", type=float, default=math.inf, help="start no point after this")
    p.add_argument(
        "--no-minatar", action="store_true", help="leave out the MinAtar games' traffic model"
    )
    p.add_argument("--out", type=Path, default=None, help="JSON output path (PNG beside it)")
    a = p.parse_args(argv)
    if a.repeats < 3:
        p.error("--repeats must be >= 3 (a median of at least 3)")
    for size in a.sizes:
        jaxsim.make(ENV_ID, num_particles=size)  # a bad size is named before anything runs
    a.k = tuple(a.k)
    a.out = a.out or default_out("fusion_sizes")
    return a


def main(argv=None) -> int:
    args = parse_args(argv)
    on_gpu = jax.default_backend() == "gpu"
    started, prov = time.perf_counter(), provenance()
    print(f"fusion vs size on {prov['device_kind']}; commit {prov['commit']}", flush=True)
    if not on_gpu:
        print("no GPU: the fused kernel runs in interpret mode (a correctness cost, not a speed)")
    partial = args.out.with_name(args.out.stem + ".partial.jsonl")
    partial.unlink(missing_ok=True)
    rows = []
    for size in args.sizes:
        for outputs in args.outputs:
            rows.append(run_size(size, outputs, args, on_gpu, started))
            append_jsonl(partial, rows[-1])
    minatar = []
    if not args.no_minatar:  # shapes only: seconds of tracing, nothing runs
        block = block_envs(1, args.block_envs, args.max_block_elems)
        for outputs in args.outputs:
            minatar += minatar_traffic(outputs, args.steps, args.k, block)
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    result = {
        "benchmark": "fusion_sizes",
        "unit": "env-steps/s",
        "env_id": ENV_ID,
        "interpret_mode": not on_gpu,
        "register_pressure": "measured on a GPU only" if not on_gpu else "see compile_s and rates",
        "published": PUBLISHED,
        "floors": {"bandwidth_bytes_per_s": H200_BANDWIDTH},
        "provenance": prov,
        "config": config,
        "wall_s": round(time.perf_counter() - started, 1),
        "rows": rows,
        "minatar_traffic": minatar,
    }
    try:
        png = plot_sizes(result, args.out.with_suffix(".png"))
    except ImportError:  # matplotlib is optional
        png = None
    failed = [r["num_particles"] for r in rows if not r["check"].get("pass")]
    failed += [r["num_particles"] for r in rows for p in r["points"] if p["status"] == "failed"]
    failed = [f"N={n}" for n in sorted(set(failed))]
    # Its tables: the suite's section, as RESULTS.md shows them.
    return finish(result, args.out, None, failed, partial, png)


if __name__ == "__main__":
    raise SystemExit(main())
