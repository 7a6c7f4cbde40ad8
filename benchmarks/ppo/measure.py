"""PPO time to a solved agent: jaxsim's PPO beside Stable-Baselines3, per seed, cold and warm.

Usage:
  python -m benchmarks.ppo.measure                             # the recorded run (~10 min, 2 cores)
  python -m benchmarks.ppo.measure --envs CartPole-v1 --no-sb3      # one env, no baseline
  python -m benchmarks.ppo.measure --quick                       # tiny budgets: checks that it runs

"Solved", the same for both libraries (`agents.loop.confirmed`): a seed's deterministic stop
check (32 episodes, one on each of 32 environments, every 1024 env steps: the preset's
`log_every` updates) has a mean return >= 475 on CartPole-v1 (>= -200 on Pendulum-v1), and an
independent deterministic evaluation (>= 32 episodes, keys or env seeds apart from the check's)
confirms it; the seed stops there, and a check it does not confirm is recorded. jaxsim
trains its seeds at once with the train command's loop (`agents.loop.run_chunks`) and its time
per seed is the time until the last seed is solved / seeds; SB3 (rl-zoo's CartPole settings)
trains one seed after another in this process, with torch's default threads and with one.
Times exclude the checks and their confirmations on both sides and include jaxsim's compile,
reported apart: cold (a fresh persistent-cache folder) and warm (a new agent loading from it).
`--whole-process` adds `benchmarks.ppo.process`: the train command and SB3 as whole processes.
On a GPU, `--gpu-sps` measures training env-steps/s of CartPole with 4096 envs for the scan
and the fused rollout; elsewhere the record says it is unmeasured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

import jax

import jaxsim
from agents import compile_cache, logs
from agents.ppo import PPO
from agents.presets import config_for, target_for
from atomicfiles import finite_json
from benchmarks.baselines.ppo_sb3 import SB3_CARTPOLE, TARGETS, sb3_baseline
from benchmarks.harness.arguments import split_list
from benchmarks.harness.provenance import provenance
from benchmarks.harness.record import append_jsonl, default_out, finish
from benchmarks.harness.solved import Confirmations
from benchmarks.harness.training import train_to_target
from benchmarks.ppo.gpu import gpu_training_sps
from benchmarks.ppo.process import whole_process


# ------------------------------------------------------------------------------------ jaxsim PPO
def learn_jaxsim(env_id: str, seeds: int, cache_dir: str, total_steps: int | None = None) -> dict:
    """Trains `seeds` seeds at once to the preset's target with the train command's loop
    (`agents.loop.run_chunks`: stop checks between chunks, solved seeds frozen), from a new agent
    (nothing compiled in memory), with the persistent compilation cache in `cache_dir`."""
    cache = "warm" if os.listdir(compile_cache.enable(cache_dir)) else "cold"
    config = config_for(env_id, **({"total_steps": total_steps} if total_steps else {}))
    target = target_for(env_id)
    confirmations = Confirmations(seeds)

    def point(report, step) -> dict:
        confirmations.observe(report, step)
        returns, confirm = report.eval_returns, report.confirm_returns
        return {
            "mean_return": float(returns.mean()),
            "std_return": float(returns.std()),
            "per_seed": returns.tolist(),
            "confirm_per_seed": None if confirm is None else confirm.tolist(),
            "solved": sum(u is not None for u in report.solved_update),
        }

    run = train_to_target(
        lambda: PPO(config, jaxsim.make(env_id)),
        jax.random.split(jax.random.key(0), seeds),
        target,
        chunk=config.log_every,
        point=point,
    )
    curve, solved = run.curve, run.solved
    done = curve[-1]
    steps = [None if u is None else u * config.steps_per_update for u in solved]
    reached = [next(p for p in curve if p["step"] >= s) if s else None for s in steps]
    all_solved = all(s is not None for s in steps)
    return {
        "config": config.to_dict(),
        "loadavg_1min_after": os.getloadavg()[0],
        "cache": cache,
        "seeds": seeds,
        "target": target,
        "eval_every_updates": config.log_every,
        "eval_episodes_per_seed": config.eval_envs,
        "reached": all_solved,
        **confirmations.fields(solved),
        "per_seed_steps_to_target": steps,
        "steps_to_target_per_seed": max(steps) if all_solved else None,
        "mean_steps_to_target": statistics.mean(s for s in steps if s) if any(steps) else None,
        # To the check that found the last seed solved, for all seeds together.
        "wall_s_to_target": done["wall_s"] if all_solved else None,
        "train_wall_s_to_target": done["train_wall_s"] if all_solved else None,
        "train_cpu_s_to_target": done["train_cpu_s"] if all_solved else None,
        "per_seed_train_wall_s_to_target": done["train_wall_s"] / seeds if all_solved else None,
        "per_seed_wall_s_to_target": done["wall_s"] / seeds if all_solved else None,
        "seed_train_wall_s_at_solve": [p and p["train_wall_s"] for p in reached],
        "compile_s_in_train_wall": run.compile_s,
        "compile_s_by_function": run.watch.by_function,
        "compile_s_training_loop": run.loop_compile_s,
        "xla_compiles": run.watch.compiles,
        # The stop checks and the independent evaluations that confirmed them, compiles included.
        "stop_check_wall_s": run.check_wall_s,
        "final_mean_return": done["mean_return"],
        "final_std_return": done["std_return"],
        "total_steps_per_seed": max(u or 0 for u in solved) * config.steps_per_update
        if all_solved
        else config.num_updates * config.steps_per_update,
        "sps_whole_loop": done["step"] * seeds / done["train_wall_s"],
        "curve": curve,
    }


def cold_and_warm(env_id: str, seeds: int, warm_repeats: int, total_steps: int | None) -> dict:
    """One cold run (a fresh cache folder), then `warm_repeats` runs that load from it; the warm
    runs must reproduce the cold one's result exactly (same executables, same keys)."""
    with tempfile.TemporaryDirectory(prefix="jaxsim-xla-") as cache_dir:
        cold = learn_jaxsim(env_id, seeds, cache_dir, total_steps)
        warm = [learn_jaxsim(env_id, seeds, cache_dir, total_steps) for _ in range(warm_repeats)]
    for w in warm:
        if w["per_seed_steps_to_target"] != cold["per_seed_steps_to_target"]:
            raise AssertionError(
                f"{env_id}: a warm run solved at {w['per_seed_steps_to_target']}, the cold one "
                f"at {cold['per_seed_steps_to_target']}: cached executables changed the result"
            )
    key = "per_seed_train_wall_s_to_target"
    times = [w[key] for w in warm if w[key] is not None]
    return {
        **cold,
        "cold": _brief(cold),
        "warm_runs": [_brief(w) for w in warm],
        "warm_per_seed_train_wall_s_to_target": statistics.median(times) if times else None,
        "warm_compile_s_training_loop": statistics.median(
            w["compile_s_training_loop"] for w in warm
        )
        if warm
        else None,
    }


def _brief(run: dict) -> dict:
    keys = (
        "cache",
        "per_seed_train_wall_s_to_target",
        "per_seed_wall_s_to_target",
        "train_wall_s_to_target",
        "compile_s_in_train_wall",
        "compile_s_training_loop",
        "compile_s_by_function",
        "xla_compiles",
        "loadavg_1min_after",
    )
    return {k: run[k] for k in keys}


# ----------------------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    prog = "python -m benchmarks.ppo.measure"
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    p.add_argument("--envs", default="CartPole-v1,Pendulum-v1", help="comma-separated env ids")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--total-steps", type=int, default=None, help="override the presets' budget")
    p.add_argument("--warm-repeats", type=int, default=3, help="warm runs after the cold one")
    p.add_argument("--sb3", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--sb3-seeds", type=int, default=3, help="SB3 seeds with one torch thread")
    p.add_argument(
        "--sb3-default-thread-seeds",
        type=int,
        default=3,
        help="SB3 seeds with torch's default threads (on a loaded 2-core machine its OpenMP "
        "threads spin against other processes and a seed can take minutes)",
    )
    p.add_argument("--sb3-max-steps", type=int, default=SB3_CARTPOLE["n_timesteps"])
    p.add_argument(
        "--whole-process",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time the train command and SB3 as whole processes (benchmarks.ppo.process)",
    )
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
        args.sb3_max_steps, args.warm_repeats, args.whole_process = 2048, 1, False
        args.sb3_default_thread_seeds = 1
    out = Path(args.out or default_out("ppo", args.quick))
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

    previous_cache = compile_cache.current_dir()
    for env_id in envs:
        print(f"jaxsim PPO on {env_id}, {args.seeds} seeds, cold and warm ...", flush=True)
        run = cold_and_warm(env_id, args.seeds, args.warm_repeats, args.total_steps)
        result["jaxsim"][env_id] = run
        append_jsonl(partial, {env_id: finite_json(run)})
        curve_png = out.with_name(f"{out.stem}_{env_id}.png")
        logs.plot_curve(
            run["curve"],
            str(curve_png),
            f"jaxsim PPO on {env_id}: evaluation, {args.seeds} seeds",
            target=TARGETS[env_id],
            ylabel="evaluation return (deterministic)",
        )
    compile_cache.enable(previous_cache) if previous_cache else compile_cache.disable()
    if args.sb3 and "CartPole-v1" in envs:
        config = config_for("CartPole-v1")
        every, episodes = config.log_every * config.steps_per_update, config.eval_envs
        sb3 = {}
        for label, threads, n in (
            ("1_thread", 1, args.sb3_seeds),
            ("default_threads", 0, args.sb3_default_thread_seeds),
        ):
            print(f"Stable-Baselines3 PPO on CartPole-v1, {label}, {n} seeds ...", flush=True)
            sb3[label] = sb3_baseline(n, args.sb3_max_steps, every, episodes, threads)
        record("sb3", sb3["default_threads"])
        record("sb3_1_thread", sb3["1_thread"])
        result["comparison"] = _compare(result["jaxsim"]["CartPole-v1"], sb3)
    elif not args.sb3:
        result["sb3"] = {"skipped": "--no-sb3"}
    if args.whole_process and "CartPole-v1" in envs:
        print("whole processes: agents.train and SB3 ...", flush=True)
        sb3_seeds = {1: args.sb3_seeds, 0: args.sb3_default_thread_seeds} if args.sb3 else {}
        record("whole_process", whole_process(args.seeds, sb3_seeds, 3))
    if args.gpu_sps:
        record("gpu_training_sps", gpu_training_sps(4096, 2 if args.quick else 20))
    return finish(result, out, partial=partial)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def _training_compile_s(jx: dict) -> float:
    return sum(v for k, v in jx["compile_s_by_function"].items() if "evaluate" not in k)


def _compare(jx: dict, sb3: dict) -> dict:
    if "skipped" in sb3["default_threads"]:
        return {"skipped": sb3["default_threads"]["skipped"]}
    cold, warm = jx["per_seed_train_wall_s_to_target"], jx["warm_per_seed_train_wall_s_to_target"]
    theirs = sb3["default_threads"]["median_train_wall_s_to_target"]
    theirs_1 = sb3["1_thread"]["median_train_wall_s_to_target"]
    return {
        "metric": "training wall-clock to a solved agent per seed (stop checks excluded, compile "
        f"included): median SB3 seed / (jaxsim's time for all {jx['seeds']} seeds / seeds)",
        "jaxsim_cold_per_seed_s": cold,
        "jaxsim_warm_per_seed_s": warm,
        "sb3_per_seed_s": theirs,
        "sb3_1_thread_per_seed_s": theirs_1,
        "speedup": _ratio(theirs, warm),
        "speedup_cold": _ratio(theirs, cold),
        "speedup_vs_1_thread": _ratio(theirs_1, warm),
        "speedup_cold_vs_1_thread": _ratio(theirs_1, cold),
        "target_5x_warm_met": None if warm is None or not theirs else theirs / warm >= 5,
        "target_2x_cold_met": None if cold is None or not theirs else theirs / cold >= 2,
        "jaxsim_compile_s_training_loop_cold": jx["compile_s_training_loop"],
        "target_loop_compile_2s_met": jx["compile_s_training_loop"] <= 2.0,
        # Without the compile of what the training time counts (init and the loop; the stop
        # checks' evaluate is excluded from it with the checks).
        "speedup_excluding_jaxsim_compile": _ratio(
            theirs, (jx["train_wall_s_to_target"] - _training_compile_s(jx)) / jx["seeds"]
        )
        if jx["train_wall_s_to_target"]
        else None,
        "jaxsim_mean_steps_to_target": jx["mean_steps_to_target"],
        "sb3_mean_steps_to_target": sb3["default_threads"]["mean_steps_to_target"],
        "jaxsim_sps_whole_loop": jx["sps_whole_loop"],
        "sb3_sps_whole_loop": sb3["default_threads"]["mean_sps_whole_loop"],
    }


if __name__ == "__main__":
    raise SystemExit(main())
