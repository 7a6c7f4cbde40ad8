"""Where an RL training iteration's time goes: jaxsim (scan, fused) beside a classic CPU loop.

Usage:
  python -m benchmarks.breakdown.measure          # CartPole-v1, 8 envs x 128 steps, PPO update
  python -m benchmarks.breakdown.measure --quick  # fewer iterations; ~1 min on 2 cores
  python -m benchmarks.breakdown.measure --num-envs 64 --trace-dir prof/  # keep Perfetto traces

One iteration is one PPO update: collect num_envs x num_steps transitions, then GAE and
update_epochs x num_minibatches gradient steps. Each case is profiled with `jaxsim.profile`
(device time per named phase from the XLA trace, device idle time between kernels, host time,
dispatches, compile time apart, trace overhead measured on the case itself and taken out) and
grouped into simulation, policy inference, learning, other device work, host/Python and idle:

  ppo_scan     agents.ppo's one-jit update with jaxsim.rollout(backend="scan")
  ppo_fused    the same with backend="fused" (Pallas; on a CPU it runs interpreted, so its
               timing says nothing about a GPU)
  gym_sync     Gymnasium SyncVectorEnv stepped in Python, a jitted policy call per step, then
               the same PPO learning step jitted once per update (the loop CPU simulators use)
  rollout_scan, rollout_fused (not run by default) experience collection alone

`--rounds N` profiles each case N times and records the overhead correction's error each time
(the traced time, corrected, against uninstrumented calls the calibration did not use).

`--agent dqn` (or sac, ppo) adds one update of that agent at its preset for --env; the on-policy
versus off-policy comparison is benchmarks/offpolicy/.
Results go to runs/bench/breakdown_<machine>.json (with provenance) and a PNG beside it.
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import Any

import jaxsim
from atomicfiles import finite_json
from benchmarks.breakdown.cases import (
    ENV_ID,
    OFF_POLICY_PHASES,
    Case,
    agent_case,
    gym_case,
    ppo_case,
    rollout_case,
)
from benchmarks.harness.arguments import split_list, unknown_names
from benchmarks.harness.optional import not_measured
from benchmarks.harness.provenance import provenance
from benchmarks.harness.record import append_jsonl, default_out, finish
from jaxsim.profiler import COMPILE, DISPATCH, IDLE, PYTHON, UNSCOPED, plot_stacked

# Host and idle categories in greys, so that the device's work stands out.
COLORS = {
    "other device (unscoped)": "#8c564b",
    "host/Python": "#969696",
    "idle device": "#d9d9d9",
}
CATEGORIES: dict[str, tuple[str, ...]] = {
    "simulation": ("env_step", "auto_reset", "rollout"),
    "policy inference": ("policy",),
    "learning": ("gae", "shuffle", "loss", "backward", "optimizer", *OFF_POLICY_PHASES),
    "other device (unscoped)": (UNSCOPED,),
    "host/Python": (DISPATCH, COMPILE, PYTHON),
    "idle device": (IDLE,),
}
# A phase's device idle time (between its kernels inside a running executable) counts as idle;
# its host time (a Gymnasium step under a TraceAnnotation("env_step")) as the phase's category.


# -------------------------------------------------------------------------------------- running
def categorize(report) -> dict[str, float]:
    """A ProfileReport's rows (seconds per iteration) -> the categories of CATEGORIES."""
    out = dict.fromkeys(CATEGORIES, 0.0)
    for row in report.rows:
        cat = next((c for c, rows in CATEGORIES.items() if row.name in rows), "learning")
        out[cat] += row.device_s + row.host_s
        out["idle device"] += row.idle_s
    return out


def measure(case: Case, args) -> dict[str, Any]:
    record: dict[str, Any] = {"case": case.label, "kind": case.kind, "notes": case.notes}
    first: list = []

    def fn():  # the profile's first call compiles (so its HLO is captured); check its output
        out = case.fn()
        if not first:
            first.append(out)
        return out

    profile = functools.partial(
        jaxsim.profile,
        fn,
        phases=case.phases,
        iterations=args.iterations,
        repeats=args.repeats,
        min_time=args.min_time,
    )
    report = profile(out_dir=args.trace_dir, name=case.label, png=args.trace_dir is not None)
    # More rounds only measure how well the overhead correction holds (each profiles anew).
    keys = ("traced_s", "calibration_traced_s", "calibration_untraced_s", "validation_s")
    errors = [report.overhead["corrected_error"]]
    model_errors = [report.overhead["model_error"]]
    rounds = [{k: report.overhead[k] for k in keys}]
    for _ in range(args.rounds - 1):
        again = profile()
        errors.append(again.overhead["corrected_error"])
        model_errors.append(again.overhead["model_error"])
        rounds.append({k: again.overhead[k] for k in keys})
    problem = case.check(first[0])
    if problem is not None:
        return {**record, "status": "failed", "error": f"output check: {problem}"}
    cats = categorize(report)
    return {
        **record,
        "status": "ok",
        "steps_per_iteration": case.steps_per_iteration,
        "wall_s": report.wall_s,
        "steps_per_s": case.steps_per_iteration / report.wall_s,
        "categories_s": cats,
        "category_shares": {k: v / report.wall_s for k, v in cats.items()},
        "dispatches_per_iteration": report.dispatches_per_iteration,
        "device_busy_fraction": report.device_busy_fraction,
        "compile_s": report.compile_s,
        "overhead_corrected_error": report.overhead["corrected_error"],
        "overhead_model_error": report.overhead["model_error"],
        "overhead_corrected_errors": errors,
        "overhead_model_errors": model_errors,
        "overhead_rounds": rounds,
        "traced_over_untraced": report.overhead["traced_s"] / report.wall_s,
        "report": report.to_dict(),
    }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.breakdown.measure", description=__doc__)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--env", default=ENV_ID)
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--num-steps", type=int, default=128)
    p.add_argument("--update-epochs", type=int, default=4)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--iterations", type=int, default=10, help="attributed traced iterations")
    p.add_argument("--repeats", type=int, default=10, help="uninstrumented iterations (at least)")
    p.add_argument(
        "--min-time",
        type=float,
        default=1.0,
        help="seconds each of uninstrumented and traced calls run about (fast cases)",
    )
    p.add_argument(
        "--cases",
        default="ppo_scan,ppo_fused,gym_sync",
        help="comma-separated, of ppo_scan, ppo_fused, gym_sync, rollout_scan, rollout_fused",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="profile each case this many times to measure the overhead correction's error",
    )
    p.add_argument(
        "--agent", action="append", default=[], help="an agents.train algorithm at its preset"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="3 traced and 3 timed iterations")
    p.add_argument("--out", type=Path, default=None, help="JSON path (PNG written beside it)")
    p.add_argument("--trace-dir", type=Path, default=None, help="keep each case's trace here")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.quick:
        args.iterations, args.repeats = 3, 3
    builders = {
        "ppo_scan": lambda: ppo_case(args, "scan"),
        "ppo_fused": lambda: ppo_case(args, "fused"),
        "gym_sync": lambda: gym_case(args),
        "rollout_scan": lambda: rollout_case(args, "scan"),
        "rollout_fused": lambda: rollout_case(args, "fused"),
    }
    names = split_list(args.cases)
    problem = unknown_names(names, list(builders), "case(s)")
    if problem:
        raise SystemExit(problem)
    for name in args.agent:
        builders[name] = functools.partial(agent_case, args, name)
        names.append(name)
    out = args.out or default_out("breakdown", args.quick)
    partial = out.with_name(out.stem + ".partial.jsonl")
    partial.unlink(missing_ok=True)

    results = []
    for name in names:
        print(f"[breakdown] {name} ...", flush=True)
        try:
            record = measure(builders[name](), args)
        except Exception as e:  # one broken case must not lose the others' results
            record = not_measured({"case": name}, e, failed_key="error")
        results.append(record)
        append_jsonl(partial, finite_json(record))

    off_policy = {
        "measured": any(r.get("kind") == "off-policy" and r["status"] == "ok" for r in results),
        "reason": "RL-Scope's on-policy vs off-policy comparison is benchmarks/offpolicy/; "
        "--agent dqn (or sac) adds an off-policy case here.",
    }
    result = {
        "benchmark": "breakdown",
        "provenance": provenance(["gymnasium", "optax"]),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "categories": {k: list(v) for k, v in CATEGORIES.items()},
        "results": results,
        "off_policy": off_policy,
    }
    png = out.with_suffix(".png")
    ok = [r for r in results if r["status"] == "ok"]
    if ok:
        try:
            plot_stacked(
                {r["case"]: r["categories_s"] for r in ok},
                png,
                title=f"{args.env}: {args.num_envs} envs x {args.num_steps} steps + PPO update",
                colors=COLORS,
            )
        except ImportError as e:
            print(f"PNG skipped: matplotlib is not installed ({e})")
            png = None
    failed = [r["case"] for r in results if r["status"] == "failed"]
    return finish(result, out, None, failed, partial, png if ok else None)


if __name__ == "__main__":
    raise SystemExit(main())
