"""A hyperparameter sweep in one process against the same runs as separate processes.

`python -m benchmarks.micro.sweep_bench --out DIR` measures, in one run on this machine:

1. The command a user runs: `python -m agents.train ppo --env CartPole-v1 --sweep
   learning_rate=... --sweep ent_coef=... --seeds 4` (6 configurations x 4 seeds, one
   program) against the same 24 runs as separate `python -m agents.train` processes, one
   after the other, as a user would run them (each with `--seeds 1 --seed s` and the
   configuration's flags). Wall time of each process end to end (start-up, compile, training,
   final evaluation). `--separate-configs K` runs the separate processes of the first K
   configurations only (all their seeds) and extrapolates the 24-run total from their mean
   per configuration; the record says which runs were measured and that the total is an
   extrapolation. Both sides use one fresh persistent compilation cache each, as a user's
   default cache would be: separate runs of the same configuration (another --seed) load
   its compiled program; another learning rate compiles again (a float config value is a
   constant in the program).
2. In this process, the compile and the run apart: the sweep's program (`make_train(config,
   env, sweep=...)` under jit(vmap) over the seeds) and one configuration's (jit(vmap) over
   its seeds), compile timed once, run the median of `--repeats` runs after it
   (`block_until_ready`); the sweep's outputs are checked against the separate program's
   for a configuration (same keys: parameters within float rounding).
3. Agreement: each configuration's final evaluation (mean over seeds, from sweep.json)
   against the separate runs' (their eval.json), within seed noise: |difference| <= 2 x the
   standard error of the difference of the two means (4 seeds each).

Writes DIR/sweep_<machine>.json (machine, device, jax version, commit, command, every figure);
DIR defaults to runs/bench/. `--beside-rejax` measures instead the same grid at rejax's published
CartPole PPO settings, jaxsim's train command beside rejax's jit(vmap) sweep in its peer venv
(`benchmarks/peers/peer_rejax.py --sweep`), two rounds in swapped order, into
DIR/sweep_rejax_<machine>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.harness.arguments import count
from benchmarks.harness.paths import RUNS_DIR
from benchmarks.harness.timing import time_process, train_command

LEARNING_RATES = (5e-4, 2e-3, 5e-3)
ENT_COEFS = (0.0, 0.01)
ENV = "CartPole-v1"


def _train_command(out: str, cache: str, total_steps: int, extra: list[str]) -> list[str]:
    flags = ["--total-steps", total_steps, "--target-return", "none", *extra]
    return train_command("ppo", ENV, out, cache, *flags)


def _configs() -> list[dict[str, float]]:
    return [{"learning_rate": lr, "ent_coef": ent} for lr in LEARNING_RATES for ent in ENT_COEFS]


def _grid() -> tuple[str, str]:
    """The learning rates and entropy coefficients as the command lines write them."""
    return tuple(",".join(f"{v:g}" for v in values) for values in (LEARNING_RATES, ENT_COEFS))


def _sweep_flags(seeds: int) -> list[str]:
    lrs, ents = _grid()
    return ["--sweep", f"learning_rate={lrs}", "--sweep", f"ent_coef={ents}", "--seeds", str(seeds)]


def _sweep_meta(out: Path) -> dict:
    """A sweep's sweep.json, its configurations checked to be the grid in `_configs()`'s order
    (learning rate slowest)."""
    meta = json.loads((out / "sweep.json").read_text())
    assert [c["values"] for c in meta["configs"]] == _configs(), meta["configs"]
    return meta


def measure_processes(work: Path, total_steps: int, seeds: int, separate_configs: int) -> dict:
    configs = _configs()
    sweep_flags = _sweep_flags(seeds)
    sweep_out = work / "sweep"
    cmd = _train_command(str(sweep_out), str(work / "cache_sweep"), total_steps, sweep_flags)
    print("sweep process:", " ".join(cmd[1:]), flush=True)
    sweep_wall = time_process(cmd)["wall_s"]
    print(f"  {sweep_wall:.1f} s", flush=True)
    sweep_meta = _sweep_meta(sweep_out)

    separate = []
    for c, values in enumerate(configs[:separate_configs]):
        for seed in range(seeds):
            out = work / f"separate_{c}_{seed}"
            flags = [
                "--learning-rate",
                f"{values['learning_rate']:g}",
                "--ent-coef",
                f"{values['ent_coef']:g}",
                "--seeds",
                "1",
                "--seed",
                str(seed),
            ]
            cmd = _train_command(str(out), str(work / "cache_separate"), total_steps, flags)
            wall = time_process(cmd)["wall_s"]
            with open(out / "eval.json") as f:
                final = json.load(f)["mean_return"]
            separate.append({"config": c, **values, "seed": seed, "wall_s": wall, "eval": final})
            print(f"  separate config {c} seed {seed}: {wall:.1f} s, eval {final:.1f}", flush=True)

    measured_total = sum(r["wall_s"] for r in separate)
    per_config = [
        sum(r["wall_s"] for r in separate if r["config"] == c) for c in range(separate_configs)
    ]
    total = measured_total * len(configs) / separate_configs
    agreement = []
    for c in range(separate_configs):
        a = np.asarray(sweep_meta["configs"][c]["per_seed_mean_return"], float)
        b = np.asarray([r["eval"] for r in separate if r["config"] == c], float)
        se = float(np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size))
        diff = float(a.mean() - b.mean())
        agreement.append(
            {
                "config": c,
                **configs[c],
                "sweep_mean": float(a.mean()),
                "sweep_std": float(a.std()),
                "separate_mean": float(b.mean()),
                "separate_std": float(b.std()),
                "difference": diff,
                "two_standard_errors": 2 * se,
                "within_seed_noise": bool(abs(diff) <= 2 * se),
            }
        )
    return {
        "sweep_command": "python -m agents.train "
        + " ".join(_train_command("OUT/sweep", "OUT/cache_sweep", total_steps, sweep_flags)[3:]),
        "sweep_wall_s": sweep_wall,
        "sweep_best": sweep_meta["best"],
        "sweep_configs": sweep_meta["configs"],
        "separate_runs": separate,
        "separate_measured": f"configurations 0..{separate_configs - 1} x seeds 0..{seeds - 1} "
        f"({len(separate)} of {len(configs) * seeds} runs)",
        "separate_measured_wall_s": measured_total,
        "separate_wall_s_per_config": per_config,
        "separate_total_wall_s": total,
        "separate_total_is_extrapolated": separate_configs < len(configs),
        "speedup": total / sweep_wall,
        "agreement": agreement,
        "all_within_seed_noise": all(a["within_seed_noise"] for a in agreement),
    }


def measure_in_process(total_steps: int, seeds: int, repeats: int) -> dict:
    """Compile and run apart, in this process: the sweep's program and one configuration's."""
    import jax

    import jaxsim
    from agents import make_train
    from agents.presets import config_for

    env = jaxsim.make(ENV)
    config = config_for(ENV, "ppo", total_steps=total_steps)
    grid = {"learning_rate": LEARNING_RATES, "ent_coef": ENT_COEFS}
    keys = jax.random.split(jax.random.key(0), seeds)

    def timed(train):
        fn = jax.jit(jax.vmap(train))
        t0 = time.perf_counter()
        compiled = fn.lower(keys).compile()
        compile_s = time.perf_counter() - t0
        runs, out = [], None
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = jax.block_until_ready(compiled(keys))
            runs.append(time.perf_counter() - t0)
        return out, {"compile_s": compile_s, "run_s": runs, "run_median_s": statistics.median(runs)}

    (sweep_runner, sweep_metrics), sweep_t = timed(make_train(config, env, sweep=grid))
    last = _configs()[-1]
    import dataclasses

    one = dataclasses.replace(config, **last)
    (one_runner, one_metrics), one_t = timed(make_train(one, env))
    # The sweep's last configuration against its own program, same keys: the first update's
    # rollout (initial parameters) bit for bit, its loss to float rounding. Over hundreds of
    # updates the programs' rounding differences grow into other trajectories (PPO is chaotic
    # in its parameters), so the final parameters are recorded, not compared.
    first_sweep = np.asarray(sweep_metrics.mean_return[:, -1, 0])
    first_one = np.asarray(one_metrics.mean_return[:, 0])
    loss_diff = float(
        np.max(
            np.abs(
                np.asarray(sweep_metrics.loss.total[:, -1, 0])
                - np.asarray(one_metrics.loss.total[:, 0])
            )
        )
    )
    if not (np.array_equal(first_sweep, first_one) and loss_diff < 1e-5):
        raise AssertionError(
            f"the sweep's configuration {last} differs from its run at update 1: returns "
            f"{first_sweep} vs {first_one}, loss difference {loss_diff}"
        )
    diffs = jax.tree.map(
        lambda a, b: float(np.max(np.abs(np.asarray(a[:, -1]) - np.asarray(b)))),
        sweep_runner.params,
        one_runner.params,
    )
    max_diff = max(jax.tree.leaves(diffs))
    n = len(_configs())
    return {
        "sweep_program": sweep_t,
        "one_config_program": one_t,
        "configs": n,
        "seeds": seeds,
        "run_ratio_sequential_over_sweep": n * one_t["run_median_s"] / sweep_t["run_median_s"],
        "compile_plus_run_ratio": n
        * (one_t["compile_s"] + one_t["run_median_s"])
        / (sweep_t["compile_s"] + sweep_t["run_median_s"]),
        "checked_config": last,
        "update_1_returns_bit_equal": True,
        "update_1_loss_max_abs_diff": loss_diff,
        "final_param_max_abs_diff_vs_separate_program": max_diff,
    }


# rejax's published CartPole PPO (benchmarks/peers/peer_rejax.py PUBLISHED["ppo"]) as train
# flags: 5 envs x 100 steps, 5 epochs of 5 minibatches, no lr annealing, no observation or reward
# normalisation, advantages normalised per minibatch and the value loss clipped (as rejax does),
# a 64-64 tanh MLP, the whole 100k steps (no stop at a target, on either side).
REJAX_FLAGS = (
    "--num-envs 5 --num-steps 100 --update-epochs 5 --num-minibatches 5 --max-grad-norm 0.5 "
    "--gamma 0.99 --gae-lambda 0.95 --clip-eps 0.2 --vf-coef 0.5 --hidden 64,64 --clip-value "
    "--normalize-advantages --no-anneal-lr --no-normalize-obs --no-scale-rewards"
).split()
REJAX_STEPS = 100_000


def beside_rejax(out_dir: Path, seeds: int) -> int:
    """The 6 x `seeds` sweep as two whole processes in one run: jaxsim's train command and
    rejax's jit(vmap) sweep at the same settings, one after the other, then again in the other
    order; wall time start to exit, each side's final evaluations per configuration."""
    from benchmarks.harness.commands import portable_command
    from benchmarks.harness.provenance import machine_tag, provenance
    from benchmarks.harness.record import finish
    from benchmarks.peers.measure import peer_missing, peer_python

    if peer_missing("rejax"):
        print(f"sweep_bench --beside-rejax: {peer_missing('rejax')}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="sweep_rejax_"))
    script = Path(__file__).parents[1] / "peers" / "peer_rejax.py"
    peer = [str(peer_python("rejax")), str(script), "ppo", "--seeds", str(seeds)]
    peer += ["--total-timesteps", str(REJAX_STEPS), "--sweep", ";".join(_grid())]
    flags = [*REJAX_FLAGS, *_sweep_flags(seeds)]
    rows = []
    try:
        for order in (("jaxsim", "rejax"), ("rejax", "jaxsim")):
            row = {}
            for side in order:
                if side == "jaxsim":
                    out = work / f"jaxsim_{len(rows)}"
                    cache = str(work / f"cache_{len(rows)}")
                    run = time_process(_train_command(str(out), cache, REJAX_STEPS, flags))
                    evals = [c["per_seed_mean_return"] for c in _sweep_meta(out)["configs"]]
                else:
                    run = time_process(peer)
                    evals = json.loads(run["stdout"].strip().splitlines()[-1])["final_eval"]
                # Every configuration and seed evaluated, in the grid's order on both sides.
                assert np.shape(evals) == (len(_configs()), seeds), (side, np.shape(evals))
                wall = run["wall_s"]
                row[side] = {"wall_s": wall, "final_eval": evals}
                print(f"  {side}: {wall:.1f} s", flush=True)
            rows.append(row)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratios = [r["rejax"]["wall_s"] / r["jaxsim"]["wall_s"] for r in rows]
    record = {
        "benchmark": "sweep_beside_rejax",
        "provenance": provenance(("optax",)),
        "env": ENV,
        "grid": {"learning_rate": LEARNING_RATES, "ent_coef": ENT_COEFS},
        "seeds": seeds,
        "total_steps_per_seed": REJAX_STEPS,
        "jaxsim_command": portable_command(_train_command("OUT", "CACHE", REJAX_STEPS, flags)),
        "rejax_command": portable_command(peer),
        "note": "whole processes, start to exit, each side's compile in; rejax evaluates "
        "greedily over 128 episodes at the end, jaxsim over its eval envs; two rounds, the "
        "order swapped",
        "rounds": rows,
        "rejax_over_jaxsim_wall": ratios,
        "rejax_over_jaxsim_wall_median": statistics.median(ratios),
        "loadavg_1_5_15min_end": [round(x, 2) for x in os.getloadavg()],
    }
    table = [
        f"jaxsim {r['jaxsim']['wall_s']:.1f} s, rejax {r['rejax']['wall_s']:.1f} s" for r in rows
    ]
    table.append(f"rejax / jaxsim wall: {', '.join(f'{x:.2f}' for x in ratios)}")
    return finish(record, out_dir / f"sweep_rejax_{machine_tag()}.json", "\n".join(table))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.micro.sweep_bench", description=__doc__
    )
    parser.add_argument("--out", default=str(RUNS_DIR), help="folder of the record")
    parser.add_argument(
        "--beside-rejax",
        action="store_true",
        help="instead: the same sweep at rejax's published CartPole PPO settings, jaxsim's train "
        "command beside rejax's jit(vmap) sweep (peer venv: benchmarks/peers/setup_envs.sh rejax)",
    )
    parser.add_argument("--total-steps", type=count, default=51_200, help="env steps per seed")
    parser.add_argument("--seeds", type=count, default=4)
    parser.add_argument(
        "--separate-configs",
        type=count,
        default=6,
        help="configurations whose separate runs are measured (all seeds); fewer than 6: the "
        "24-run total is extrapolated from them (recorded as such)",
    )
    parser.add_argument("--repeats", type=count, default=3, help="runs of each in-process program")
    parser.add_argument("--keep", action="store_true", help="keep the runs' folders")
    args = parser.parse_args(argv)
    if args.separate_configs > len(_configs()):
        parser.error(f"--separate-configs must be at most {len(_configs())}")
    if args.seeds < 2:
        parser.error("--seeds must be >= 2 (the agreement check needs a spread over seeds)")
    from atomicfiles import finite_json, write_json_atomic
    from benchmarks.harness.provenance import machine_tag, provenance

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.beside_rejax:
        return beside_rejax(out_dir, args.seeds)
    work = Path(tempfile.mkdtemp(prefix="sweep_bench_"))
    t0 = time.perf_counter()
    path = out_dir / f"sweep_{machine_tag()}.json"
    record = {
        "benchmark": "sweep",
        "provenance": provenance(("optax",)),
        "env": ENV,
        "algorithm": "ppo (the CartPole-v1 preset)",
        "grid": {"learning_rate": LEARNING_RATES, "ent_coef": ENT_COEFS},
        "seeds": args.seeds,
        "total_steps_per_seed": args.total_steps,
    }
    try:
        record["processes"] = measure_processes(
            work, args.total_steps, args.seeds, args.separate_configs
        )
        # Written at once: the in-process part below adds to it, and a failure there keeps it.
        record["in_process"] = None
        write_json_atomic(path, finite_json(record))
        record["in_process"] = measure_in_process(args.total_steps, args.seeds, args.repeats)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    record["provenance_end"] = {"loadavg_1_5_15min": provenance()["loadavg_1_5_15min"]}
    record["wall_s"] = round(time.perf_counter() - t0, 1)
    processes, in_process = record["processes"], record["in_process"]
    write_json_atomic(path, finite_json(record))
    p = processes
    how = f" (extrapolated from {p['separate_measured']})"
    print(
        f"\nsweep (1 process, {len(_configs())} configs x {args.seeds} seeds): "
        f"{p['sweep_wall_s']:.1f} s; separate processes: {p['separate_total_wall_s']:.1f} s"
        f"{how if p['separate_total_is_extrapolated'] else ''}"
        f"; ratio {p['speedup']:.2f}x; agreement within seed noise: {p['all_within_seed_noise']}"
    )
    ip = in_process
    print(
        f"in process: sweep program compile {ip['sweep_program']['compile_s']:.1f} s, run "
        f"{ip['sweep_program']['run_median_s']:.2f} s (median of {args.repeats}); one "
        f"configuration compile {ip['one_config_program']['compile_s']:.1f} s, run "
        f"{ip['one_config_program']['run_median_s']:.2f} s; run ratio "
        f"{ip['run_ratio_sequential_over_sweep']:.2f}x\nwrote {path}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
