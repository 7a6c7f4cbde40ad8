"""Time to solve CartPole through EnvPool: the decoupled train command beside Stable-Baselines3
on the same EnvPool environments, whole processes as users run them.

Usage:
  python -m benchmarks.decoupled.measure             # 3 seeds a side, cold and warm (~5 min loaded)
  python -m benchmarks.decoupled.measure --quick       # 1 seed a side
  python -m benchmarks.decoupled.measure --no-sb3      # jaxsim only

jaxsim: `python -m agents.train ppo --env envpool/CartPole-v1 --seed K --no-plot --quiet` (the
decoupled mode, its default schedule and actors, the CartPole preset), one process per seed: it
stops when a stop check (32 deterministic episodes every 1024 env steps) reaches 475 and an
independent evaluation (>= 32 episodes, pools seeded apart) confirms it (`agents.loop.confirmed`).
Cold: each seed with a fresh compilation cache folder; warm: each seed with a folder a cold run
filled. SB3: `python -m benchmarks.baselines.ppo_sb3 --seed K --simulator envpool --threads 1`,
rl-zoo's CartPole PPO on EnvPool's CartPole through `benchmarks.baselines.envpool_vec` (training,
stop-check and confirming environments alike), judged by the same rule at the same cadence, one
torch thread (at this machine's load torch's default of 2 threads made SB3 up to 40x slower, which
would inflate the ratio; see benchmarks.offpolicy_solve). Every process starts from a fresh
interpreter, imports included; times are from start to exit. Per seed, the runs go jaxsim cold,
jaxsim warm, SB3, so a change in the shared machine's load falls on every side; the load average
is recorded around each process. The ratio is SB3's median per-seed time over jaxsim's.
Writes runs/bench/decoupled_<machine>[_quick].json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.baselines.ppo_sb3 import sb3_process
from benchmarks.harness.arguments import name_list
from benchmarks.harness.formatting import format_seconds, format_table, format_verdict
from benchmarks.harness.record import default_out, finish
from benchmarks.harness.solved import RULE
from benchmarks.harness.timing import time_process, train_command

ENV = "envpool/CartPole-v1"
ARRANGEMENTS = {
    "default": [],  # the command's defaults: the reproducible schedule, 2 actors
    "sync-1actor": ["--schedule", "sync", "--actors", "1"],  # step, then learn: no lag
}
"""Name -> the train command's flags beyond the common ones."""
SPEEDUP_TARGET = 4.0  # issue 25: solved >= 4x sooner per seed than SB3 on the same environments


def jaxsim_command(seed: int, out: Path, cache: str, extra: list[str]) -> list[str]:
    """The decoupled train command of one seed, as a user types it (plus where it writes)."""
    return train_command("ppo", ENV, out, cache, "--seed", seed, *extra)


def jaxsim_process(seed: int, out: Path, cache: str, extra: list[str]) -> dict[str, Any]:
    """One seed's process: its wall time and what its eval.json says about solving."""
    run = time_process(jaxsim_command(seed, out, cache, extra))
    evaluation = json.loads((out / "eval.json").read_text())
    return {
        "seed": seed,
        **run,
        "solved": bool(evaluation["solved_per_seed"][0]),
        "steps_to_target": evaluation["steps_to_target_per_seed"][0],
        "confirm_return": evaluation["mean_return"],
        "rejected_checks": evaluation["rejected_checks"],
        # The stop checks' and the confirming evaluation's seconds, inside the process time.
        "check_wall_s": evaluation["evaluation_wall_s"],
        "train_loop_wall_s": evaluation["wall_time"],
    }


def jaxsim_seeds_process(seeds: int, out: Path, cache: str, extra: list[str]) -> dict[str, Any]:
    """One `--seeds N` process (the seeds one after another, programs compiled once): its wall
    time divided by the seeds, as `benchmarks.ppo.process` times `agents.train --seeds 3`."""
    run = time_process(jaxsim_command(0, out, cache, [*extra, "--seeds", str(seeds)]))
    evaluation = json.loads((out / "eval.json").read_text())
    return {
        **run,
        "seeds": seeds,
        "per_seed_wall_s": run["wall_s"] / seeds,
        "per_seed_wall_s_excluding_checks": (run["wall_s"] - evaluation["evaluation_wall_s"])
        / seeds,
        "all_solved": all(evaluation["solved_per_seed"]),
        "solved_per_seed": evaluation["solved_per_seed"],
        "steps_to_target_per_seed": evaluation["steps_to_target_per_seed"],
        "check_wall_s": evaluation["evaluation_wall_s"],
    }


def _median(runs: list[dict[str, Any]], key: str = "wall_s") -> float | None:
    values = [r[key] for r in runs if r["solved"]]
    return statistics.median(values) if len(values) == len(runs) and values else None


def side(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A side's runs and their per-seed summary; the median counts only if every seed solved."""
    lean = [dict(r, wall_s=r["wall_s"] - r["check_wall_s"]) for r in runs]
    return {
        "runs": runs,
        "seeds": len(runs),
        "seeds_solved": sum(r["solved"] for r in runs),
        "solved_per_seed": [r["solved"] for r in runs],
        "steps_to_target_per_seed": [r["steps_to_target"] for r in runs],
        "median_wall_s_per_seed": _median(runs),
        "median_wall_s_per_seed_excluding_checks": _median(lean),
    }


def compare(jaxsim: dict[str, Any], sb3: dict[str, Any]) -> dict[str, Any]:
    """SB3's median per-seed process time over one arrangement's, cold and warm (one process a
    seed) and warm with `--seeds N` (its wall / N), with and without each side's checks."""
    out: dict[str, Any] = {"target": f">= {SPEEDUP_TARGET:g}x", "metric": (
        "median over seeds of whole-process wall time to a solved seed (start to exit, imports "
        "and compiles in): SB3's / jaxsim's")}  # fmt: skip
    theirs = sb3["median_wall_s_per_seed"]
    theirs_lean = sb3["median_wall_s_per_seed_excluding_checks"]
    for cache in ("cold", "warm"):
        ours = jaxsim[cache]
        a, b = theirs, ours["median_wall_s_per_seed"]
        speedup = a / b if a and b else None
        out[f"speedup_{cache}"] = speedup
        out[f"target_met_{cache}"] = None if speedup is None else speedup >= SPEEDUP_TARGET
        b = ours["median_wall_s_per_seed_excluding_checks"]
        out[f"speedup_{cache}_excluding_checks"] = theirs_lean / b if theirs_lean and b else None
    multi = jaxsim.get("warm_seeds")
    if multi:
        ok = multi["all_solved"] and theirs
        speedup = theirs / multi["per_seed_wall_s"] if ok else None
        out["speedup_warm_seeds"] = speedup
        out["target_met_warm_seeds"] = None if speedup is None else speedup >= SPEEDUP_TARGET
        lean = multi["per_seed_wall_s_excluding_checks"]
        out["speedup_warm_seeds_excluding_checks"] = theirs_lean / lean if ok else None
    steps = [x for x in jaxsim["warm"]["steps_to_target_per_seed"] if x]
    sb3_steps = [x for x in sb3["steps_to_target_per_seed"] if x]
    if steps and sb3_steps:
        out["steps_ratio"] = statistics.mean(sb3_steps) / statistics.mean(steps)
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.decoupled.measure", description=__doc__)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--seeds", type=int, default=3, help="seeds a side (one process each)")
    p.add_argument("--sb3", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--sb3-threads", type=int, default=1, help="torch threads (0: its default)")
    p.add_argument(
        "--arrangements",
        type=name_list(tuple(ARRANGEMENTS), "arrangement(s)"),
        default=tuple(ARRANGEMENTS),
        help=f"of {', '.join(ARRANGEMENTS)}: the train command's schedule and actors",
    )
    p.add_argument("--quick", action="store_true", help="1 seed a side")
    p.add_argument("--out", type=Path, default=None, help="record (default runs/bench/...)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    seeds = 1 if args.quick else args.seeds
    if seeds < 1 or args.sb3_threads < 0:
        raise SystemExit("benchmarks.decoupled: --seeds must be >= 1 and --sb3-threads >= 0")
    if args.sb3:
        try:
            import envpool  # noqa: F401
            import stable_baselines3  # noqa: F401
        except ImportError as e:
            raise SystemExit(f"benchmarks.decoupled: {e}; or run with --no-sb3") from None
    arrangements = args.arrangements
    from benchmarks.harness.provenance import provenance  # imports jax

    out = args.out or default_out("decoupled", args.quick)
    record: dict[str, Any] = {
        "benchmark": "decoupled",
        "provenance": provenance(["envpool", "stable-baselines3", "torch"]),
        "quick": args.quick,
        "env": ENV,
        "target": 475.0,
        "solved_rule": RULE,
        "jaxsim_command": f"python -m agents.train ppo --env {ENV} --seed K --no-plot --quiet",
        "arrangements": {a: ARRANGEMENTS[a] for a in arrangements},
        "sb3_command": "python -m benchmarks.baselines.ppo_sb3 --seed K --simulator envpool "
        f"--threads {args.sb3_threads}",
    }
    t0 = time.perf_counter()
    runs: dict[str, list] = {f"{a} {c}": [] for a in arrangements for c in ("cold", "warm")}
    runs["sb3"] = []
    multi = {}
    with tempfile.TemporaryDirectory(prefix="decoupled-solve-") as tmp:
        tmp = Path(tmp)
        warm_cache = {}
        for seed in range(seeds):
            for a in arrangements:
                flags = ARRANGEMENTS[a]
                cold = str(tmp / f"xla_{a}_{seed}")
                runs[f"{a} cold"].append(jaxsim_process(seed, tmp / f"{a}_c{seed}", cold, flags))
                # Warm: a cache a cold run filled (the programs do not depend on the seed).
                warm_cache.setdefault(a, cold)
                warm = warm_cache[a]
                runs[f"{a} warm"].append(jaxsim_process(seed, tmp / f"{a}_w{seed}", warm, flags))
            if args.sb3:
                sb3_out = tmp / f"sb3_{seed}.json"
                runs["sb3"].append(sb3_process(seed, args.sb3_threads, sb3_out, "envpool"))
            took = ", ".join(f"{k} {v[-1]['wall_s']:.1f} s" for k, v in runs.items() if v)
            print(f"[decoupled] seed {seed}: {took}", flush=True)
        if seeds > 1:
            for a in arrangements:
                flags = ARRANGEMENTS[a]
                multi[a] = jaxsim_seeds_process(seeds, tmp / f"{a}_seeds", warm_cache[a], flags)
                print(f"[decoupled] {a} --seeds {seeds}: {multi[a]['wall_s']:.1f} s", flush=True)
    record["jaxsim"] = {
        a: {
            "flags": ARRANGEMENTS[a],
            "cold": side(runs[f"{a} cold"]),
            "warm": side(runs[f"{a} warm"]),
            **({"warm_seeds": multi[a]} if a in multi else {}),
        }
        for a in arrangements
    }
    record["sb3"] = side(runs["sb3"]) if args.sb3 else {"skipped": "--no-sb3"}
    if args.sb3:
        record["sb3"]["torch_threads"] = args.sb3_threads or "default"
        record["comparison"] = {
            a: compare(record["jaxsim"][a], record["sb3"]) for a in arrangements
        }
    record["wall_s"] = round(time.perf_counter() - t0, 1)
    return finish(record, out, summary(record))


def summary(record: dict[str, Any]) -> str:
    """One row per process, then the ratios per arrangement."""
    rows = []
    sides = {}
    for a, arr in record["jaxsim"].items():
        sides[f"jaxsim {a} cold"] = arr["cold"]
        sides[f"jaxsim {a} warm"] = arr["warm"]
    if "runs" in record["sb3"]:
        sides["SB3 (EnvPool)"] = record["sb3"]
    for name, s in sides.items():
        for r in s["runs"]:
            rows.append([
                f"{name} seed {r['seed']}", "yes" if r["solved"] else "no",
                f"{r['steps_to_target']:,}" if r["steps_to_target"] else "-",
                format_seconds(r["wall_s"]), format_seconds(r["check_wall_s"]),
                f"{r['load_1min_before']:.1f}-{r['load_1min_after']:.1f}",
            ])  # fmt: skip
    for a, arr in record["jaxsim"].items():
        m = arr.get("warm_seeds")
        if m:
            rows.append([
                f"jaxsim {a} warm --seeds {m['seeds']} (per seed)",
                f"{sum(m['solved_per_seed'])}/{m['seeds']}",
                ", ".join(f"{x:,}" if x else "-" for x in m["steps_to_target_per_seed"]),
                format_seconds(m["per_seed_wall_s"]),
                format_seconds(m["check_wall_s"] / m["seeds"]),
                f"{m['load_1min_before']:.1f}-{m['load_1min_after']:.1f}",
            ])  # fmt: skip
    headers = ["process", "solved", "steps to solved", "wall s", "checks s", "load"]
    lines = [format_table(headers, rows)]
    for a, cmp in (record.get("comparison") or {}).items():
        for how in ("cold", "warm", "warm_seeds"):
            if f"speedup_{how}" not in cmp:
                continue
            x, lean = cmp[f"speedup_{how}"], cmp[f"speedup_{how}_excluding_checks"]
            lines.append(
                f"{a}: SB3 / jaxsim {how}, per seed: "
                + (f"{x:.2f}x" if x else "n/a (a seed not solved)")
                + (f" ({lean:.2f}x without either side's checks)" if lean else "")
                + f"; target {cmp['target']}: {format_verdict(cmp[f'target_met_{how}'])}"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
