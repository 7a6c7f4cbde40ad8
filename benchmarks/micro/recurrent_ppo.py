"""Recurrent PPO (GRU) against the MLP PPO on velocity-hidden CartPole, at one training budget.

Usage:
  python -m benchmarks.micro.recurrent_ppo --out benchmarks/results/recurrent_cpu2_vm.json
  python -m benchmarks.micro.recurrent_ppo --budget-s 30 --out /tmp/r.json   # a quick look

CartPole-NoVel-v1 observes (x, theta) only: a memoryless policy cannot tell which way the pole
moves. For each algorithm (`ppo_rnn`: `agents.ppo_rnn`; `ppo`: the MLP actor-critic, the same
sizes and hyperparameters but no memory), `--seeds` seeds train at once (`jit(vmap(run))`),
chunk by chunk, until `--budget-s` seconds of training have passed (compile excluded, timed
apart) or the config's total steps are done; then each seed's deterministic policy is evaluated
on `eval_envs` episodes (fresh keys). Every chunk is checked (finite losses) and waited for
(`block_until_ready`). Learning figures: per-seed evaluation means, their mean, std and median.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import jax
import numpy as np

import jaxsim
from agents.algorithms import agent_type
from agents.presets import config_for
from atomicfiles import write_json_atomic
from benchmarks.harness.arguments import count, positive_seconds
from benchmarks.harness.provenance import provenance

ENV_ID = "CartPole-NoVel-v1"
ALGORITHMS = ("ppo_rnn", "ppo")


def _config(algorithm: str, eval_envs: int):
    """Both algorithms get the recurrent preset's sizes and hyperparameters (the MLP PPO
    without the GRU-only field), so the network is the one difference."""
    rnn = config_for(ENV_ID, "ppo_rnn", eval_envs=eval_envs)
    if algorithm == "ppo_rnn":
        return rnn
    shared = {k: v for k, v in rnn.to_dict().items() if k != "gru_size"}
    return config_for(ENV_ID, "ppo", **{**shared, "hidden": tuple(shared["hidden"])})


def measure(algorithm: str, seeds: int, budget_s: float, chunk: int, eval_envs: int) -> dict:
    env = jaxsim.make(ENV_ID)
    config = _config(algorithm, eval_envs)
    agent = agent_type(algorithm)(config, env)
    chunk = min(chunk, config.num_updates)
    start = time.perf_counter()
    agent.precompile(seeds, chunks=(chunk,), evaluate=True)
    compile_s = time.perf_counter() - start
    keys = jax.random.split(jax.random.key(0), seeds)
    runner = jax.block_until_ready(agent.jit_init()(keys))
    run = agent.jit_run(chunk)
    updates, train_s, chunk_s, cpu_s = 0, 0.0, [], 0.0
    while train_s < budget_s and updates + chunk <= config.num_updates:
        t0, c0 = time.perf_counter(), time.process_time()
        runner, metrics = jax.block_until_ready(run(runner))
        elapsed = time.perf_counter() - t0
        cpu_s += time.process_time() - c0
        loss = np.asarray(metrics.loss.total)
        if not np.isfinite(loss).all():
            raise FloatingPointError(f"{algorithm}: non-finite loss after {updates} updates")
        updates += chunk
        train_s += elapsed
        chunk_s.append(elapsed)
        print(
            f"[{algorithm}] {updates} updates, {train_s:.0f} s, training return "
            f"{np.nanmean(np.asarray(metrics.mean_return)[:, -1]):.1f}",
            flush=True,
        )
    eval_keys = jax.random.split(jax.random.key(10_000), seeds)
    returns = np.asarray(jax.block_until_ready(agent.jit_evaluate()(runner, eval_keys)))
    if not np.isfinite(returns).all():
        raise FloatingPointError(f"{algorithm}: non-finite evaluation returns")
    per_seed = returns.mean(axis=1)
    steps = updates * config.steps_per_update
    return {
        "algorithm": algorithm,
        "config": config.to_dict(),
        "seeds": seeds,
        "compile_s": round(compile_s, 2),
        "train_s": round(train_s, 2),
        # CPU seconds the process got while training: on a shared machine, far below
        # train_s x cores when others load it.
        "train_process_cpu_s": round(cpu_s, 2),
        "updates": updates,
        "env_steps_per_seed": steps,
        "env_steps_per_s_all_seeds": round(steps * seeds / train_s, 1) if train_s else None,
        "median_chunk_s": round(float(np.median(chunk_s)), 3) if chunk_s else None,
        "chunk_updates": chunk,
        "eval_episodes_per_seed": int(returns.shape[1]),
        "eval_mean_per_seed": [round(float(x), 2) for x in per_seed],
        "eval_mean": round(float(per_seed.mean()), 2),
        "eval_std": round(float(per_seed.std()), 2),
        "eval_median": round(float(np.median(per_seed)), 2),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write (atomically)")
    parser.add_argument(
        "--budget-s", type=positive_seconds, default=600.0, help="training seconds each"
    )
    parser.add_argument("--seeds", type=count, default=3)
    parser.add_argument("--chunk", type=count, default=10, help="updates per jitted call")
    parser.add_argument("--eval-envs", type=count, default=32)
    parser.add_argument("--algorithms", nargs="+", choices=ALGORITHMS, default=list(ALGORITHMS))
    parser.add_argument(
        "--parallel",
        action="store_true",
        help="train the algorithms at once, one child process each (each gets the same budget; "
        "on a loaded machine they share it as they would share it with others)",
    )
    args = parser.parse_args(argv)
    record = {
        "benchmark": "recurrent_ppo",
        "env": ENV_ID,
        "budget_s": args.budget_s,
        "provenance_start": provenance(),
        "results": [],
    }
    if args.parallel and len(args.algorithms) > 1:
        record["parallel"] = True
        record["results"] = _in_children(args, argv if argv is not None else sys.argv[1:])
    else:
        for algorithm in args.algorithms:
            record["results"].append(
                measure(algorithm, args.seeds, args.budget_s, args.chunk, args.eval_envs)
            )
            write_json_atomic(args.out, record)  # what is measured so far survives a kill
    record["loadavg_end_1_5_15min"] = provenance()["loadavg_1_5_15min"]
    write_json_atomic(args.out, record)
    for r in record["results"]:
        print(
            f"{r['algorithm']}: eval {r['eval_mean']} +- {r['eval_std']} "
            f"(seeds {r['eval_mean_per_seed']}) after {r['env_steps_per_seed']} steps/seed in "
            f"{r['train_s']} s (+{r['compile_s']} s compile)"
        )
    return record


def _in_children(args, argv: list[str]) -> list[dict]:
    """Each algorithm measured by a child process of this script, all at once."""
    base = [a for a in argv if a != "--parallel"]
    with tempfile.TemporaryDirectory() as tmp:
        children = []
        for algorithm in args.algorithms:
            out = os.path.join(tmp, f"{algorithm}.json")
            command = [sys.executable, "-m", "benchmarks.micro.recurrent_ppo", *base]
            command += ["--algorithms", algorithm, "--out", out]  # argparse: the last ones win
            children.append((out, subprocess.Popen(command)))
        results = []
        for out, child in children:
            if child.wait() != 0:
                raise RuntimeError(f"{child.args} failed with exit code {child.returncode}")
            with open(out) as f:
                results.extend(json.load(f)["results"])
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
