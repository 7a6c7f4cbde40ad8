"""Compact auto-reset against the whole-batch reset: one environment, both ways, in one process.

Usage:
  python -m benchmarks.micro.compact_reset                        # brax ant, N = 16, 256
  python -m benchmarks.micro.compact_reset --env CartPole-v1 --num-envs 256,4096 --steps 500
  python -m benchmarks.micro.compact_reset --env brax/ant --num-envs 256 --steps 16 --out x.json

`jaxsim.rollout.step` resets only the done environments, gathered, where `Env.compact_reset` is
True (brax, Playground), and the whole batch otherwise. This runs `jaxsim.rollout` (scan
backend, random policy, outputs="rewards", each call continuing the previous one's state) on two
subclasses of the environment's class that differ only in `compact_reset`, so the figure is
that choice alone: compact env-steps/s over whole-batch env-steps/s (> 1: compact is faster).
The two variants' samples take turns (`time_interleaved`), so load falls on both alike. Before
timing, both variants' first calls, from the same state and key, are checked to agree until
each environment's first reset (flags exactly, rewards to float32 rounding); whether they stay
bitwise equal after it is recorded (see `check_same`: yes for native and gymnax resets, not for
brax's, whose batched pipeline init rounds differently for 16 and 256 lanes). Compile is
separated from the run, every call is blocked on, and the record holds the median of repeats
with the provenance.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

import jaxsim
from benchmarks.harness.arguments import count, int_list
from benchmarks.harness.formatting import format_rate, format_table
from benchmarks.harness.provenance import provenance
from benchmarks.harness.record import default_out, finish
from benchmarks.harness.timing import continued_rollout, time_interleaved
from jaxsim.envs import size_cpu_pool

VARIANTS = {"whole": False, "compact": True}
PACKAGES = ("brax", "mujoco", "gymnax")


def variants(env_id: str) -> dict[str, jaxsim.Env]:
    """The environment twice: its class with `compact_reset` False ("whole") and True."""
    base = jaxsim.make(env_id)
    return {
        name: type(f"{type(base).__name__}_{name}", (type(base),), {"compact_reset": flag})(
            **base.make_kwargs()
        )
        for name, flag in VARIANTS.items()
    }


def check_same(outs: dict[str, Any]) -> dict[str, Any]:
    """Both variants' first calls agree until each lane's first reset; bitwise after it?

    Until a lane's first episode ends the two programs step the same states: flags equal,
    rewards within float32 rounding. A reset's fresh state is bitwise the same where
    `init_state` treats each lane alone (native, gymnax); brax's reset is batched linear algebra
    whose rounding depends on the batch size, and its chaotic contacts then grow the difference,
    so after a reset the record keeps whether every leaf is bitwise equal, and the largest
    reward difference.
    """
    a, b = outs["whole"], outs["compact"]
    done = np.asarray(a.done)
    steps = np.arange(done.shape[0])[:, None]
    first_end = np.where(done.any(axis=0), done.argmax(axis=0), done.shape[0] - 1)
    before = steps <= first_end[None, :]  # [steps, num_envs]: up to each lane's first end
    for name in ("terminated", "truncated"):
        x, y = np.asarray(getattr(a, name)), np.asarray(getattr(b, name))
        np.testing.assert_array_equal(x[before], y[before], err_msg=name)
    ra, rb = np.asarray(a.reward), np.asarray(b.reward)
    np.testing.assert_allclose(ra[before], rb[before], rtol=1e-5, atol=1e-6)
    if not (np.isfinite(ra).all() and np.isfinite(rb).all()):
        raise AssertionError("compact_reset: a reward is not finite")
    bitwise = all(
        np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )
    return {
        "pass": True,
        "bitwise_equal": bitwise,
        "max_reward_difference": float(np.max(np.abs(ra - rb))),
        "episodes_ended": int(done.sum()),
    }


def measure(env_id: str, num_envs: int, steps: int, repeats: int) -> dict[str, Any]:
    envs = variants(env_id)
    # One call per variant, each continuing its last state (one compile): the first, from the
    # initial batch, is checked, and the samples continue from it.
    calls = {
        name: continued_rollout(
            env,
            "random",
            steps,
            jaxsim.initial_state(env, jax.random.key(0), num_envs),
            num_envs=num_envs,
            key=jax.random.key(0),
            outputs="rewards",
        )
        for name, env in envs.items()
    }
    check = check_same({name: call() for name, call in calls.items()})
    timings = time_interleaved(calls, repeats=repeats)
    for name, timing in timings.items():
        if timing.compiles_during_timing:
            raise AssertionError(f"{name}: {timing.compiles_during_timing} compiles while timing")
    rates = {name: num_envs * steps / t.median_s for name, t in timings.items()}
    whole, compact = timings["whole"].samples_s, timings["compact"].samples_s
    return {
        "env_id": env_id,
        "num_envs": num_envs,
        "steps": steps,
        "check": check,
        "steps_per_s": rates,
        "compact_over_whole": rates["compact"] / rates["whole"],
        # One round's samples ran back to back: their ratio cancels slow drifts in load.
        "paired_median": statistics.median(w / c for w, c in zip(whole, compact, strict=True)),
        "timing": {name: t.to_dict() for name, t in timings.items()},
    }


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env", default="brax/ant", help="a jaxsim id, e.g. brax/ant, CartPole-v1")
    p.add_argument("--num-envs", type=int_list, default=(16, 256))
    p.add_argument("--steps", type=count, default=64, help="steps per call")
    p.add_argument("--repeats", type=count, default=5)
    p.add_argument("--out", type=Path, default=None, help="JSON output path")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    note = size_cpu_pool(args.env)  # before JAX starts: brax's LAPACK kernels (jaxsim.envs)
    if note:
        print(f"compact_reset: {note}", flush=True)
    started = time.perf_counter()
    points = [measure(args.env, n, args.steps, args.repeats) for n in args.num_envs]
    rows = [
        [
            p["env_id"],
            p["num_envs"],
            format_rate(p["steps_per_s"]["whole"]),
            format_rate(p["steps_per_s"]["compact"]),
            f"{p['compact_over_whole']:.3f}x",
            f"{p['paired_median']:.3f}x",
        ]
        for p in points
    ]
    header = ["env", "N", "whole", "compact", "compact / whole", "paired"]
    record = {
        "benchmark": "compact_reset",
        "provenance": provenance(PACKAGES),
        "config": {k: v for k, v in vars(args).items() if k != "out"} | {"out": str(args.out)},
        "note": (
            "env-steps/s of jaxsim.rollout (scan, random policy, outputs='rewards', continuing "
            "state) with Env.compact_reset False and True; median of interleaved repeats"
        ),
        "results": points,
        "wall_s": round(time.perf_counter() - started, 1),
    }
    out = args.out or default_out(f"compact_reset_{args.env.replace('/', '-')}")
    return finish(record, out, format_table(header, rows))


if __name__ == "__main__":
    sys.exit(main())
