"""Adapters cost nothing: `jaxsim.rollout` on brax and gymnax environments beside each library's
own loop, and Gymnasium's MuJoCo Ant-v5 (the CPU baseline people use), in one run.

Usage:
  python -m benchmarks.adapters.measure           # brax ant and Breakout-MinAtar, N = 16, 256, 2048
  python -m benchmarks.adapters.measure --quick          # N = 16, 256; a few minutes on 2 cores
  python -m benchmarks.adapters.measure --families brax --num-envs 16 --repeats 3 --out x.json

Pairs, each at every N, with the same N, the same steps per call (one jit over `steps` steps),
the same policy function (uniform random actions, one draw per batch step) and continuing from
the previous call's state (episodes straddle calls, as in training):
- brax: `jaxsim.rollout(jaxsim.make("brax/ant"), ..., outputs="rewards")` against brax's own
  jit(scan(step)) of `brax.envs.training.wrap(env, episode_length)` (its VmapWrapper,
  EpisodeWrapper and AutoResetWrapper). Both keep reward, done and truncation per step.
- gymnax: `jaxsim.rollout(jaxsim.make("gymnax/Breakout-MinAtar"), ...)` against gymnax's own
  jit(scan(vmap(env.step))), whose step auto-resets itself.
- Gymnasium `Ant-v5` (MuJoCo, C, float64): one env in a Python loop and a SyncVectorEnv.

Each pair's samples take turns (`time_interleaved`), so load from other processes falls on both
alike; the figure is jaxsim's env-steps/s over the library's, target >= 0.95 (overhead <= 5%).
Compile is separated from the run, every call is blocked on, and after the timing every
environment's episodes are followed through every call (rewards finite, no episode past the
time limit, truncation exactly at it).

Where jaxsim's time over brax's own loop went (brax ant, random actions, 2 shared cores,
2026-12): a random ant falls within ~40 steps, so some environment of the batch ends its
episode on 36% of steps at N=16 and 93% at N=256, and jaxsim's same-step reset ran brax's full
`reset` (a fresh random state and pipeline init) for the whole batch on each such step, where
brax's AutoResetWrapper only selects each environment's cached first state. At N=256 one batch
reset cost 3.8 ms against 45.6 ms for a batch step: 0.91x of brax (quick record, commit
97e431e). brax and Playground environments now reset only their done environments, gathered
into N/16 slots (`jaxsim.rollout.step`, `Env.compact_reset`): compact over whole-batch 1.06x at
N=256 (`python -m benchmarks.micro.compact_reset`, record compact_reset_brax-ant_cpu2_vm.json). With
it, at load average ~0.5 (quick mode, brax only, adapters_cpu2_vm_quick_brax.json): 0.99x at
N=16 and 0.948x at N=256 (paired 0.971x, 0.981x; CPU time 0.97x, 0.953x). The full record
(adapters_cpu2_vm.json) was taken at load average ~10 on the 2 cores, where the medians swing
widely (0.68x, 0.64x, 1.11x at N=16, 256, 2048 against paired ratios 1.14x, 0.92x, 1.13x and
CPU-time ratios 0.92x, 0.96x, 0.98x): rerun it on a quiet machine before reading it closely.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

import jaxsim
from benchmarks.adapters import loops as loops
from benchmarks.harness.arguments import count, int_list, name_list
from benchmarks.harness.formatting import format_rate
from benchmarks.harness.gymnax_scan import discrete_policy, uniform_policy
from benchmarks.harness.optional import Skipped, not_measured
from benchmarks.harness.provenance import provenance
from benchmarks.harness.record import default_out, finish
from benchmarks.harness.timing import time_fn, time_interleaved, timed_point
from jaxsim.envs import size_cpu_pool

FAMILIES = ("brax", "gymnax", "gymnasium")
FULL_NUM_ENVS = (16, 256, 2048)
QUICK_NUM_ENVS = (16, 256)
OVERHEAD_BOUND = 0.95  # jaxsim / the library's own loop, env-steps/s: at most 5% slower
PACKAGES = ("brax", "mujoco", "gymnax", "gymnasium")


def _point(family, env_id, impl, num_envs, steps, timing, checks, note="") -> dict[str, Any]:
    fields = dict(family=family, env_id=env_id, impl=impl, num_envs=num_envs, steps=steps)
    return {**timed_point(impl, timing, checks, **fields), "note": note}


def _failed(family, env_id, impl, num_envs, error: Exception) -> dict[str, Any]:
    point = {"family": family, "env_id": env_id, "impl": impl, "num_envs": num_envs}
    return not_measured(point, error)


def measure_pair(family, env_id, own, limit, num_envs, steps, args) -> list[dict[str, Any]]:
    """jaxsim and the library's own loop at one N, interleaved; two points and the comparison."""
    env = jaxsim.make(env_id, **({"max_episode_steps": limit} if limit else {}))
    limit = int(env.default_params.max_episode_steps)
    space = env.action_space(env.default_params)
    if hasattr(space, "n"):
        policy = discrete_policy(space.n)
    else:
        policy = uniform_policy(space.low, space.high, space.shape)
    own_runner = own(policy, num_envs, steps, limit)  # first: a missing library stops here
    runners = {"jaxsim": loops.jaxsim_runner(env, policy, num_envs, steps), family: own_runner}
    timings = time_interleaved(runners, repeats=args.repeats, min_time=args.min_time)
    points = [
        _point(
            family, env_id, name, num_envs, steps, timings[name], loops.episode_check(runner, limit)
        )
        for name, runner in runners.items()
    ]
    mine, theirs = timings["jaxsim"], timings[family]
    a, b = mine.samples_s, theirs.samples_s
    points[0]["over_own"] = {
        "own": family,
        "ratio_of_medians": statistics.median(b) / statistics.median(a),
        # One round's samples ran back to back: their ratio cancels slow drifts in load.
        "paired_median": statistics.median(y / x for x, y in zip(a, b, strict=True)),
        "ratio_of_minima": min(b) / min(a),  # each at its least disturbed
        # This process's CPU seconds per call: the work done, whatever share of the cores
        # other processes left it (wall time on a loaded machine is mostly waiting).
        "cpu_time_ratio": _cpu_per_call(theirs) / _cpu_per_call(mine),
        "range": [min(b) / max(a), max(b) / min(a)],
    }
    return points


def _cpu_per_call(timing) -> float:
    return statistics.median(
        s * c for s, c in zip(timing.samples_s, timing.cpu_over_wall, strict=True)
    )


def pair_points(family, env_id, own, limit, steps_per_call, args) -> list[dict[str, Any]]:
    """`measure_pair` at every N of `args.num_envs`, `steps_per_call // N` steps per call."""
    points = []
    for n in args.num_envs:
        steps = max(args.min_steps, steps_per_call // n)
        points += _guarded(
            family,
            env_id,
            n,
            lambda n=n, s=steps: measure_pair(family, env_id, own, limit, n, s, args),
        )
    return points


def brax_points(args) -> list[dict[str, Any]]:
    def own(policy, num_envs, steps, limit):
        return loops.brax_runner(args.brax_env, args.brax_backend, policy, num_envs, steps, limit)

    env_id = f"brax/{args.brax_env}"
    return pair_points("brax", env_id, own, args.episode_length, args.brax_steps_per_call, args)


def gymnax_points(args) -> list[dict[str, Any]]:
    def own(policy, num_envs, steps, limit):
        return loops.gymnax_runner(args.gymnax_env, policy, num_envs, steps)

    env_id = f"gymnax/{args.gymnax_env}"
    return pair_points("gymnax", env_id, own, None, args.gymnax_steps_per_call, args)


def gymnasium_points(args) -> list[dict[str, Any]]:
    env_id = "Ant-v5"
    points = []
    for n in (1, *args.gymnasium_vector_envs):
        impl = "gymnasium" if n == 1 else "gymnasium_sync"
        steps = max(1, args.gymnasium_steps // n)

        def measure(n=n, impl=impl, steps=steps):
            call = loops.gymnasium_runner(env_id, n, steps)
            t = time_fn(call, repeats=args.repeats, min_time=args.min_time, warmup=0)
            obs, rewards = t.last
            ok = obs.shape[0] == n and np.isfinite(obs).all() and np.isfinite(rewards).all()
            if not ok:
                raise AssertionError(f"{impl}: observations {obs.shape} or rewards not finite")
            checks = {"finite": {"pass": True, "obs_shape": list(obs.shape)}}
            note = "MuJoCo C, float64; one gym.make env" if n == 1 else "SyncVectorEnv"
            return [_point("gymnasium", env_id, impl, n, steps, t, checks, note)]

        points += _guarded("gymnasium", env_id, n, measure)
    return points


def _guarded(family, env_id, n, measure) -> list[dict[str, Any]]:
    """What `measure()` gives; a library that is missing or fails becomes one point saying so."""
    t0 = time.perf_counter()
    try:
        points = measure()
    except Exception as e:  # recorded with its reason; the suite carries on
        # jaxsim.make's ImportError names the extra; Gymnasium's names its MuJoCo dependency.
        missing = isinstance(e, ImportError) or type(e).__name__ == "DependencyNotInstalled"
        points = [_failed(family, env_id, "-", n, Skipped(str(e)) if missing else e)]
    for p in points:
        if p["status"] == "ok":
            print(
                f"{p['impl']:>16} {env_id} N={n}: {format_rate(p['steps_per_s']['median'])}"
                f" env-steps/s, compile {p['compile_s'] or 0:.1f} s",
                flush=True,
            )
        else:
            print(f"{env_id} N={n}: {p['status']}: {p['reason']}", flush=True)
    print(f"  ({time.perf_counter() - t0:.0f} s)", flush=True)
    return points


def evaluate_targets(points) -> list[dict[str, Any]]:
    targets = []
    for p in points:
        if "over_own" not in p:
            continue
        over = p["over_own"]
        value = over["ratio_of_medians"]
        ok = value >= OVERHEAD_BOUND
        targets.append(
            {
                "name": f"jaxsim / {over['own']} own loop",
                "env_id": p["env_id"],
                "num_envs": p["num_envs"],
                "min": OVERHEAD_BOUND,
                "value": value,
                "range": over["range"],
                "paired_median": over["paired_median"],
                "cpu_time_ratio": over["cpu_time_ratio"],
                "pass": ok,
                "status": "pass" if ok else "fail",
            }
        )
    return targets


def _families(text: str) -> tuple[str, ...]:
    return () if text.strip() == "none" else name_list(FAMILIES, "family")(text)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help=f"N = {QUICK_NUM_ENVS}, fewer steps")
    p.add_argument("--families", type=_families, default=FAMILIES, help=f"of {FAMILIES}, or none")
    p.add_argument("--num-envs", type=int_list, default=None, help="N of the JAX pairs")
    p.add_argument("--brax-env", default="ant")
    p.add_argument("--brax-backend", default=None, help="brax's physics backend (its default)")
    p.add_argument("--episode-length", type=count, default=1000, help="brax's time limit, both")
    p.add_argument("--gymnax-env", default="Breakout-MinAtar")
    p.add_argument("--brax-steps-per-call", type=count, default=None, help="env-steps per call")
    p.add_argument("--gymnax-steps-per-call", type=count, default=None)
    p.add_argument("--min-steps", type=count, default=None, help="steps per call, at least")
    p.add_argument("--gymnasium-steps", type=count, default=None, help="env-steps per call")
    p.add_argument("--gymnasium-vector-envs", type=int_list, default=(16,))
    p.add_argument("--repeats", type=count, default=None)
    p.add_argument("--min-time", type=float, default=0.0, help="seconds per sample, at least")
    p.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = p.parse_args(argv)
    quick = args.quick
    defaults = {
        "num_envs": QUICK_NUM_ENVS if quick else FULL_NUM_ENVS,
        "brax_steps_per_call": 2048 if quick else 8192,
        "gymnax_steps_per_call": 2**16 if quick else 2**18,
        "min_steps": 8 if quick else 16,
        "gymnasium_steps": 1000 if quick else 4000,
        "repeats": 5 if quick else 7,
    }
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if "brax" in args.families:  # before JAX starts (jaxsim.envs.size_cpu_pool)
        note = size_cpu_pool(f"brax/{args.brax_env}")
        if note:
            print(f"adapters: {note}", flush=True)
    started = time.perf_counter()
    measure = {"brax": brax_points, "gymnax": gymnax_points, "gymnasium": gymnasium_points}
    points = [p for family in args.families for p in measure[family](args)]
    targets = evaluate_targets(points)
    record = {
        "benchmark": "adapters",
        "quick": args.quick,
        "provenance": provenance(PACKAGES),
        "config": {k: v for k, v in vars(args).items() if k != "out"} | {"out": str(args.out)},
        "note": (
            "env-steps/s, median of interleaved repeats; jaxsim.rollout(outputs='rewards', "
            "scan backend) beside the library's own jitted loop at the same N, steps per call "
            "and policy, both continuing across calls; Gymnasium Ant-v5 steps one MuJoCo env "
            "(or a SyncVectorEnv) from Python"
        ),
        "results": points,
        "targets": targets,
        "wall_s": round(time.perf_counter() - started, 1),
    }
    out = args.out or default_out("adapters", args.quick)
    failed = [
        f"{p['env_id']} {p['impl']} N={p['num_envs']}" for p in points if p["status"] == "failed"
    ]
    return finish(record, out, failures=failed)


if __name__ == "__main__":
    raise SystemExit(main())
