"""PPO learning benchmark: jaxsim's PPO to a target return, beside Stable-Baselines3 on CartPole.

Usage:
  python -m benchmarks.ppo                                  # the recorded run (~10 min, 2 cores)
  python -m benchmarks.ppo --envs CartPole-v1 --no-sb3      # one env, no baseline
  python -m benchmarks.ppo --quick                          # tiny budgets: checks that it runs

Targets: CartPole-v1 mean evaluation return >= 475, Pendulum-v1 >= -200, over `--seeds` seeds
(deterministic policy, `eval_envs` episodes per seed, checked every `--eval-every` updates). The
jaxsim seeds train at once (`jit(vmap(run))`); the clock starts before anything is compiled.
Two wall-clock figures are kept: everything (compile, training, the periodic evaluations) and
training only (evaluation calls excluded, compile included), the one compared with SB3, whose
evaluations are excluded alike. Stable-Baselines3 runs its seeds one after another in this same
process with rl-zoo's tuned CartPole-v1 hyperparameters; it is skipped, with the reason, where
it is not installed. On a GPU, `--gpu-sps` measures training env-steps/s of CartPole with 4096
envs for the scan and the fused rollout; elsewhere the record says it is unmeasured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import traceback
from pathlib import Path
from typing import Any

import jax
import numpy as np

import jaxsim
from agents import logs
from agents.ppo import PPO
from agents.presets import config_for
from benchmarks._common import (
    CompileWatcher,
    append_jsonl,
    finite_json,
    machine_tag,
    provenance,
    write_json_atomic,
)
from benchmarks.arguments import split_list
from benchmarks.formatting import format_seconds, format_table
from benchmarks.paths import RUNS_DIR
from benchmarks.ppo_sb3 import SB3_CARTPOLE, TARGETS, first_reach, sb3_baseline


def _largest_divisor(n: int, at_most: int) -> int:
    return max(d for d in range(1, min(n, at_most) + 1) if n % d == 0)


# ------------------------------------------------------------------------------------ jaxsim PPO
def learn_jaxsim(env_id: str, seeds: int, eval_every: int, total_steps: int | None) -> dict:
    """Trains `seeds` seeds at once, evaluating every chunk; returns curve and time to target."""
    overrides = {"total_steps": total_steps} if total_steps else {}
    config = config_for(env_id, **overrides)
    target = TARGETS[env_id]
    t_start, cpu_start = time.perf_counter(), time.process_time()
    agent = PPO(config, jaxsim.make(env_id))
    chunk = _largest_divisor(config.num_updates, eval_every)
    key = jax.random.key(0)
    # Trace + compile time inside the training calls (the evaluations' is excluded with them).
    compile_s = 0.0
    with CompileWatcher() as watch:
        runner = jax.jit(jax.vmap(agent.init))(jax.random.split(key, seeds))
    compile_s += watch.seconds or 0.0
    run, evaluate = agent.jit_run(chunk), jax.jit(jax.vmap(agent.evaluate))
    eval_s, eval_cpu_s, train_s, first_chunk_s, curve = 0.0, 0.0, 0.0, None, []
    for c in range(config.num_updates // chunk):
        t0 = time.perf_counter()
        with CompileWatcher() as watch:
            runner, _ = jax.block_until_ready(run(runner))
        compile_s += watch.seconds or 0.0
        t1, cpu1 = time.perf_counter(), time.process_time()
        eval_keys = jax.random.split(jax.random.fold_in(key, c + 1), seeds)
        per_seed = np.asarray(evaluate(runner, eval_keys)).mean(axis=1)
        t2, cpu2 = time.perf_counter(), time.process_time()
        train_s += t1 - t0
        eval_s += t2 - t1
        eval_cpu_s += cpu2 - cpu1
        first_chunk_s = t1 - t0 if first_chunk_s is None else first_chunk_s
        curve.append(
            {
                "step": (c + 1) * chunk * config.batch_size,
                "mean_return": float(per_seed.mean()),
                "std_return": float(per_seed.std()),
                "per_seed": per_seed.tolist(),
                "wall_s": t2 - t_start,
                "train_wall_s": t2 - t_start - eval_s,
                "train_cpu_s": cpu2 - cpu_start - eval_cpu_s,
                "compile_s": compile_s,
            }
        )
    steps_all = config.num_updates * config.batch_size * seeds
    steady = (config.num_updates - chunk) * config.batch_size * seeds
    reached = first_reach(curve, target)
    per_seed_reached = []
    for s in range(seeds):
        hit = next((p for p in curve if p["per_seed"][s] >= target), None)
        per_seed_reached.append(None if hit is None else hit["step"])
    return {
        "config": config.to_dict(),
        "loadavg_1min_after": os.getloadavg()[0],
        "seeds": seeds,
        "target": target,
        "eval_every_updates": chunk,
        "eval_episodes_per_seed": config.eval_envs,
        "reached": reached is not None,
        "steps_to_target_per_seed": None if reached is None else reached["step"],
        "wall_s_to_target": None if reached is None else reached["wall_s"],
        "train_wall_s_to_target": None if reached is None else reached["train_wall_s"],
        "train_cpu_s_to_target": None if reached is None else reached["train_cpu_s"],
        "compile_s_in_train_wall": compile_s,
        "per_seed_steps_to_target": per_seed_reached,
        "final_mean_return": curve[-1]["mean_return"],
        "final_std_return": curve[-1]["std_return"],
        "best_mean_return": max(p["mean_return"] for p in curve),
        "total_steps_per_seed": config.num_updates * config.batch_size,
        "total_wall_s": curve[-1]["wall_s"],
        "first_chunk_s_incl_compile": first_chunk_s,
        "sps_whole_loop": steps_all / (time.perf_counter() - t_start - eval_s),
        "sps_after_compile": steady / (train_s - first_chunk_s) if steady else None,
        "curve": curve,
    }


def callback_overhead(seeds: int, updates: int, repeats: int) -> dict:
    """Run time of CartPole PPO with the progress callback (at the default `log_every`, and at
    every update) against none at all; `seeds` train at once, as the command does."""
    every = config_for("CartPole-v1").log_every
    null = open(os.devnull, "w")  # lives as long as the callbacks
    variants = {}
    for name, log_every in (("none", None), ("default", every), ("every_update", 1)):
        config = config_for("CartPole-v1", log_every=log_every or every)
        progress = None if log_every is None else logs.TrainingProgress(seeds, updates, stream=null)
        agent = PPO(config, jaxsim.make("CartPole-v1"), progress=progress)
        runner = jax.jit(jax.vmap(agent.init))(jax.random.split(jax.random.key(0), seeds))
        fn = agent.jit_run(updates)
        jax.block_until_ready(fn(runner))  # compile
        variants[name] = (fn, runner)
    samples = {name: [] for name in variants}
    # Interleaved, so load from elsewhere hits all alike, in a new order each round: a fixed
    # order biases the variant that always runs first.
    order = np.random.default_rng(0)
    for _ in range(repeats):
        for name in order.permutation(list(variants)):
            fn, runner = variants[name]
            t0 = time.perf_counter()
            jax.block_until_ready(fn(runner))
            samples[name].append(time.perf_counter() - t0)
    median = {name: statistics.median(s) for name, s in samples.items()}
    fastest = {name: min(s) for name, s in samples.items()}
    reports = updates // every + (updates % every != 0)
    # Minima estimate the cost free of interference from other processes; every-update reporting
    # makes enough calls for a per-call cost, from which the default interval's overhead follows.
    per_call = (fastest["every_update"] - fastest["none"]) / updates
    return {
        "env": "CartPole-v1",
        "seeds": seeds,
        "updates_per_call": updates,
        "log_every_default": every,
        "host_calls_default": reports,
        "repeats": repeats,
        "median_s": median,
        "min_s": fastest,
        "samples_s": samples,
        "overhead_default": median["default"] / median["none"] - 1,
        # Ratios within one round of the interleaved loop cancel slow drifts in machine load.
        "overhead_default_paired": statistics.median(
            d / n - 1 for d, n in zip(samples["default"], samples["none"], strict=True)
        ),
        "overhead_default_of_minima": fastest["default"] / fastest["none"] - 1,
        "overhead_every_update": median["every_update"] / median["none"] - 1,
        "seconds_per_host_call": per_call,
        "overhead_default_from_per_call": per_call * reports / fastest["none"],
    }


# ------------------------------------------------------------------------------------------ GPU
def gpu_training_sps(num_envs: int, updates: int) -> dict:
    """Training env-steps/s on CartPole with `num_envs` envs, scan against fused rollout."""
    if jax.default_backend() != "gpu":
        return {"status": "unmeasured", "reason": f"no GPU: jax backend is {jax.default_backend()}"}
    out = {"status": "measured", "num_envs": num_envs, "updates_per_call": updates}
    for backend in ("scan", "fused"):
        config = config_for(
            "CartPole-v1",
            num_envs=num_envs,
            num_steps=128,
            num_minibatches=32,
            total_steps=num_envs * 128 * updates,
            rollout_backend=backend,
        )
        try:
            agent = PPO(config, jaxsim.make("CartPole-v1"))
            runner = jax.jit(agent.init)(jax.random.key(0))
            fn = jax.jit(lambda r, agent=agent: agent.run(r, updates))
            t0 = time.perf_counter()
            runner, _ = jax.block_until_ready(fn(runner))
            compile_s = time.perf_counter() - t0
            samples = []
            for _ in range(3):
                t0 = time.perf_counter()
                runner, _ = jax.block_until_ready(fn(runner))
                samples.append(time.perf_counter() - t0)
            sps = num_envs * 128 * updates / statistics.median(samples)
            out[backend] = {"sps": sps, "first_call_s": compile_s, "samples_s": samples}
        except Exception as e:  # the fused backend may not serve this policy or these outputs yet
            out[backend] = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
    return out


# ----------------------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.ppo", description=__doc__.split("\n")[0])
    p.add_argument("--envs", default="CartPole-v1,Pendulum-v1", help="comma-separated env ids")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--total-steps", type=int, default=None, help="override the presets' budget")
    p.add_argument("--eval-every", type=int, default=10, help="updates between evaluations (max)")
    p.add_argument("--sb3", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--sb3-seeds", type=int, default=3)
    p.add_argument("--sb3-max-steps", type=int, default=SB3_CARTPOLE["n_timesteps"])
    p.add_argument("--sb3-eval-every", type=int, default=4096, help="env steps between evals")
    p.add_argument("--sb3-eval-episodes", type=int, default=20)
    p.add_argument(
        "--sb3-torch-threads",
        type=int,
        default=1,
        help="torch threads for SB3 (0: torch's default); with 2 on a shared 2-core machine its "
        "OpenMP threads collapse under outside load",
    )
    p.add_argument("--overhead", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--gpu-sps", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--quick", action="store_true", help="tiny budgets; not a result")
    p.add_argument("--out", default=None, help="result JSON (default runs/bench/...)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    envs = split_list(args.envs)
    unknown = [e for e in envs if e not in TARGETS]
    if unknown:
        raise SystemExit(f"benchmarks.ppo: no target for {unknown}; known: {sorted(TARGETS)}")
    if args.quick:
        args.total_steps, args.seeds, args.sb3_seeds = args.total_steps or 4096, 1, 1
        args.sb3_max_steps, args.sb3_eval_every, args.sb3_eval_episodes = 2048, 1024, 2
    tag = machine_tag() + ("_quick" if args.quick else "")
    out = Path(args.out or RUNS_DIR / f"ppo_{tag}.json")
    partial = out.with_suffix(".partial.jsonl")
    result: dict[str, Any] = {
        "benchmark": "ppo",
        "provenance": provenance(["gymnasium", "optax", "stable-baselines3", "torch"]),
        "quick": args.quick,
        "jaxsim": {},
    }

    def record(name, value):
        result[name] = value
        append_jsonl(partial, {name: finite_json(value)})

    for env_id in envs:
        print(f"jaxsim PPO on {env_id}, {args.seeds} seeds ...", flush=True)
        result["jaxsim"][env_id] = learn_jaxsim(
            env_id, args.seeds, args.eval_every, args.total_steps
        )
        append_jsonl(partial, {env_id: finite_json(result["jaxsim"][env_id])})
        curve_png = out.with_name(f"{out.stem}_{env_id}.png")
        logs.plot_curve(
            result["jaxsim"][env_id]["curve"],
            str(curve_png),
            f"jaxsim PPO on {env_id}: evaluation, {args.seeds} seeds",
            target=TARGETS[env_id],
            ylabel="evaluation return (deterministic)",
        )
    if args.overhead:
        print("progress callback overhead ...", flush=True)
        updates = 16 if args.quick else 122
        record("progress_callback_overhead", callback_overhead(args.seeds, updates, 21))
    if args.sb3 and "CartPole-v1" in envs:
        print(f"Stable-Baselines3 PPO on CartPole-v1, {args.sb3_seeds} seeds ...", flush=True)
        sb3 = sb3_baseline(
            args.sb3_seeds,
            args.sb3_max_steps,
            args.sb3_eval_every,
            args.sb3_eval_episodes,
            args.sb3_torch_threads,
        )
        record("sb3", sb3)
        result["comparison"] = _compare(result["jaxsim"]["CartPole-v1"], sb3)
    elif not args.sb3:
        result["sb3"] = {"skipped": "--no-sb3"}
    if args.gpu_sps:
        record("gpu_training_sps", gpu_training_sps(4096, 2 if args.quick else 20))
    write_json_atomic(out, finite_json(result))
    partial.unlink(missing_ok=True)
    print(_summary(result))
    print(f"wrote {out}")
    return 0


def _compare(jx: dict, sb3: dict) -> dict:
    if "skipped" in sb3:
        return {"skipped": sb3["skipped"]}
    ours, theirs = jx["train_wall_s_to_target"], sb3["mean_train_wall_s_to_target"]
    speedup = theirs / ours if ours and theirs else None
    return {
        "metric": "training wall-clock to target (compile included, evaluations excluded): "
        f"mean of one SB3 seed / jaxsim with all {jx['seeds']} seeds at once",
        "jaxsim_train_wall_s_to_target": ours,
        "sb3_mean_train_wall_s_to_target": theirs,
        "speedup": speedup,
        "target_20x_met": None if speedup is None else speedup >= 20,
        "jaxsim_compile_s_in_train_wall": jx["compile_s_in_train_wall"],
        "speedup_excluding_jaxsim_compile": theirs / (ours - jx["compile_s_in_train_wall"])
        if ours and theirs
        else None,
        # Process CPU time is far less sensitive than wall time to load from other processes.
        "jaxsim_train_cpu_s_to_target": jx["train_cpu_s_to_target"],
        "sb3_mean_train_cpu_s_to_target": sb3["mean_train_cpu_s_to_target"],
        "speedup_cpu_time": sb3["mean_train_cpu_s_to_target"] / jx["train_cpu_s_to_target"]
        if jx["train_cpu_s_to_target"] and sb3["mean_train_cpu_s_to_target"]
        else None,
        "jaxsim_sps_whole_loop": jx["sps_whole_loop"],
        "sb3_sps_whole_loop": sb3["mean_sps_whole_loop"],
    }


def _summary(result: dict) -> str:
    rows = []
    for env_id, r in result["jaxsim"].items():
        rows.append(
            [
                f"jaxsim {env_id}",
                f"{r['final_mean_return']:.1f} ± {r['final_std_return']:.1f}",
                r["steps_to_target_per_seed"] or "not reached",
                format_seconds(r["wall_s_to_target"]),
                format_seconds(r["train_wall_s_to_target"]),
                format_seconds(r["train_cpu_s_to_target"]),
                f"{r['sps_whole_loop']:,.0f}",
            ]
        )
    sb3 = result.get("sb3", {})
    for run in sb3.get("runs", []):
        rows.append(
            [
                f"SB3 CartPole-v1 seed {run['seed']}",
                f"{run['curve'][-1]['mean_return']:.1f}" if run["curve"] else "-",
                run["steps_to_target"] or "not reached",
                format_seconds(run["wall_s_to_target"]),
                format_seconds(run["train_wall_s_to_target"]),
                format_seconds(run["train_cpu_s_to_target"]),
                f"{run['sps_whole_loop']:,.0f}",
            ]
        )
    headers = [
        "run",
        "final eval",
        "steps/seed",
        "wall s",
        "train wall s",
        "train CPU s",
        "env-steps/s",
    ]
    lines = [format_table(headers, rows)]
    if "comparison" in result and result["comparison"].get("speedup"):
        cmp = result["comparison"]
        lines.append(
            f"speedup to target vs SB3: {cmp['speedup']:.1f}x with jaxsim's compile "
            f"({cmp['jaxsim_compile_s_in_train_wall']:.1f} s) included, "
            f"{cmp['speedup_excluding_jaxsim_compile']:.1f}x without it; in CPU time "
            f"{cmp['speedup_cpu_time']:.1f}x"
        )
    if "progress_callback_overhead" in result:
        o = result["progress_callback_overhead"]
        lines.append(
            f"progress callback overhead, every {o['log_every_default']} updates: "
            f"{100 * o['overhead_default_of_minima']:+.2f}% (minima), "
            f"{100 * o['overhead_default_from_per_call']:+.2f}% "
            f"(from {1e6 * o['seconds_per_host_call']:.0f} us per host call), "
            f"{100 * o['overhead_default']:+.2f}% (medians, load-sensitive); every update: "
            f"{100 * o['overhead_every_update']:+.2f}% (medians)"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
