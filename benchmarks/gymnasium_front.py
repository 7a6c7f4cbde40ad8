"""The Gymnasium vector front against Gymnasium's numpy-vectorized CartPole, host arrays each step.

Usage:
  python -m benchmarks.gymnasium_front                # N = 16, 256, 4096; every configuration
  python -m benchmarks.gymnasium_front --quick        # shorter samples (~1 min on 2 cores)
  python -m benchmarks.gymnasium_front --num-envs 16,4096 --configs sync --out x.json

Both sides are stepped the same way, by the throughput suite's Gymnasium vector loop
(`benchmarks.rollout_throughput.baseline_runners.bench_gymnasium_vector`):
`gymnasium.make_vec(id, num_envs=N, vectorization_mode="vector_entry_point")`, uniform random
numpy actions in, numpy observations, rewards and flags out, every step (NEXT_STEP autoreset,
both sides' default). jaxsim's side is `jaxsim/CartPole-v1`, Gymnasium's is `CartPole-v1`
(`gymnasium.envs.classic_control.cartpole.CartPoleVectorEnv`).

JAX's CPU client runs computations asynchronously unless `jax_cpu_enable_async_dispatch` is off,
a process-wide flag read once, when the CPU backend starts; importing `jaxsim.gymnasium` turns
it off if JAX has not started yet. Each configuration is therefore measured in its own child
process: "sync" as the import leaves it, "async" turned back on after the import (the way out
the front documents), and "sync-1core", "sync" with the process pinned to one core (XLA splits
its larger loops across the CPU's threads; on cores other processes keep busy, the hand-offs
cost more than the split saves). Both sides run in every child, interleaved sample by sample,
so each ratio compares like with like.
Before timing, the child checks that the front's transitions equal jaxsim's own step.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.harness.formatting import format_rate, format_table
from benchmarks.harness.paths import REPO_ROOT
from benchmarks.harness.provenance import provenance
from benchmarks.harness.record import default_out, finish
from jaxsim.files import write_json_atomic

ENV_ID = "CartPole-v1"
# configuration -> (CPU dispatch, pinned to one core)
CONFIGS = {"async": ("async", False), "sync": ("sync", False), "sync-1core": ("sync", True)}
SIDES = ("jaxsim_front", "gymnasium_numpy")


def check_front_transitions(num_envs: int, steps: int = 40) -> dict:
    """The front's steps equal `jax.vmap(env.step)` from the states its observations show.

    CartPole's observation is its state (x, x_dot, theta, theta_dot). Lanes that show a
    deferred reset (NEXT_STEP) are checked to show reward 0 and no flags instead.
    """
    import gymnasium as gym
    import jax
    import jax.numpy as jnp

    import jaxsim
    import jaxsim.gymnasium  # registers jaxsim/<id>

    env = jaxsim.make(ENV_ID)
    step = jax.jit(jax.vmap(env.step, in_axes=(None, 0, 0, None)))
    venv = gym.make_vec(
        f"jaxsim/{ENV_ID}", num_envs=num_envs, vectorization_mode="vector_entry_point"
    )
    obs, _ = venv.reset(seed=0)
    rng = np.random.default_rng(0)
    pending = np.zeros(num_envs, bool)
    checked = 0
    for _ in range(steps):
        actions = rng.integers(0, 2, num_envs)
        x, x_dot, theta, theta_dot = (jnp.asarray(obs[:, i]) for i in range(4))
        time = jnp.zeros(num_envs, jnp.int32)  # compared: physics and termination, not the limit
        state = env.state_type(x=x, x_dot=x_dot, theta=theta, theta_dot=theta_dot, time=time)
        _, ts = step(jax.random.key(0), state, jnp.asarray(actions, jnp.int32), env.default_params)
        next_obs, reward, terminated, truncated, _ = venv.step(actions)
        live = ~pending
        if not np.array_equal(next_obs[live], np.asarray(ts.obs)[live]):
            raise AssertionError("jaxsim front: observations differ from jaxsim's own step")
        if not np.array_equal(terminated[live], np.asarray(ts.terminated)[live]):
            raise AssertionError("jaxsim front: terminated differs from jaxsim's own step")
        if np.any(reward[pending] != 0) or np.any(terminated[pending] | truncated[pending]):
            raise AssertionError("jaxsim front: a deferred reset showed a reward or a flag")
        checked += int(live.sum())
        pending, obs = terminated | truncated, next_obs
    venv.close()
    return {"pass": True, "transitions_compared": checked}


def run_child(config: str, num_envs: list[int], repeats: int, min_time: float, quick: bool) -> dict:
    """This process's measurements: both sides at every N, interleaved per sample."""
    dispatch, one_core = CONFIGS[config]
    if one_core:  # before JAX starts its thread pools
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import gymnasium as gym
    import jax

    import jaxsim.gymnasium  # turns asynchronous CPU dispatch off: JAX has not started yet

    if dispatch == "async":
        jax.config.update("jax_cpu_enable_async_dispatch", True)
    from benchmarks.rollout_throughput.baseline_runners import bench_gymnasium_vector
    from benchmarks.rollout_throughput.config import Config

    cfg = Config(tuple(num_envs), 1, min_time, 0, quick, SIDES)
    ids = {"jaxsim_front": f"jaxsim/{ENV_ID}", "gymnasium_numpy": ENV_ID}
    rows = []
    for n in num_envs:
        check = check_front_transitions(min(n, 256))
        samples: dict[str, list[dict]] = {side: [] for side in SIDES}
        for _ in range(repeats):  # one sample of each side in turn: load drifts hit both
            for side in SIDES:
                measured = bench_gymnasium_vector(
                    lambda side=side, n=n: gym.make_vec(
                        ids[side], num_envs=n, vectorization_mode="vector_entry_point"
                    ),
                    ENV_ID,
                    n,
                    cfg,
                    plumbing=False,
                )
                timing = measured.timing
                samples[side].append(
                    {
                        "env_steps_per_s": measured.steps_per_call / timing.median_s,
                        "compiles_during_timing": timing.compiles_during_timing,
                        "cpu_over_wall": timing.cpu_over_wall[0],
                        "checks": measured.checks,
                    }
                )
        row = {"num_envs": n, "front_check": check}
        for side in SIDES:
            rates = [s["env_steps_per_s"] for s in samples[side]]
            row[side] = {"env_steps_per_s": float(np.median(rates)), "samples": samples[side]}
        row["front_over_numpy"] = (
            row["jaxsim_front"]["env_steps_per_s"] / row["gymnasium_numpy"]["env_steps_per_s"]
        )
        print(f"N={n}: front / numpy = {row['front_over_numpy']:.2f}x", flush=True)
        rows.append(row)
    return {
        "async_dispatch": bool(jax.config.read("jax_cpu_enable_async_dispatch")),
        "cores": sorted(os.sched_getaffinity(0)),
        "front_dispatch": jaxsim.gymnasium.cpu_dispatch(),
        "rows": rows,
    }


def _spawn(config: str, args) -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"{config}.json"
        command = [
            sys.executable, "-m", "benchmarks.gymnasium_front", "--child-out", str(out),
            "--configs", config, "--num-envs", ",".join(map(str, args.num_envs)),
            "--repeats", str(args.repeats),
            *(["--quick"] if args.quick else []),
        ]  # fmt: skip
        subprocess.run(command, cwd=REPO_ROOT, env=env, check=True)
        result = json.loads(out.read_text())
    if result["async_dispatch"] != (CONFIGS[config][0] == "async"):
        raise AssertionError(
            f"{config}: the child ran with async_dispatch={result['async_dispatch']}"
        )
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="shorter samples")
    p.add_argument("--num-envs", default="16,256,4096", help="comma-separated batch sizes")
    p.add_argument("--repeats", type=int, default=5, help="samples per side and N (median)")
    p.add_argument("--configs", default=",".join(CONFIGS), help="configurations to measure")
    p.add_argument("--out", type=Path, default=None, help="JSON output path")
    p.add_argument("--child-out", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.num_envs = [int(x) for x in args.num_envs.split(",")]
    configs = args.configs.split(",")
    if any(c not in CONFIGS for c in configs) or any(n < 1 for n in args.num_envs):
        p.error(f"--configs takes names from {list(CONFIGS)}; --num-envs positive integers")
    min_time = 0.1 if args.quick else 0.4
    if args.child_out is not None:
        result = run_child(configs[0], args.num_envs, args.repeats, min_time, args.quick)
        write_json_atomic(args.child_out, result)
        return 0
    children = {config: _spawn(config, args) for config in configs}
    table = format_table(
        ["configuration", "N", "jaxsim front", "Gymnasium numpy", "front / numpy"],
        [
            [
                config,
                row["num_envs"],
                format_rate(row["jaxsim_front"]["env_steps_per_s"]),
                format_rate(row["gymnasium_numpy"]["env_steps_per_s"]),
                f"{row['front_over_numpy']:.2f}x",
            ]
            for config, child in children.items()
            for row in child["rows"]
        ],
    )
    print(table)
    record = {
        "benchmark": "gymnasium_front",
        "env_id": ENV_ID,
        "quick": args.quick,
        "provenance": provenance(["gymnasium"]),
        "note": (
            "env-steps/s through gymnasium.make_vec(..., vectorization_mode='vector_entry_point')"
            ", random numpy actions in and numpy arrays out every step, NEXT_STEP autoreset; "
            "median of interleaved samples; each configuration in its own process "
            "(sync: as importing jaxsim.gymnasium leaves it)"
        ),
        "configurations": children,
        "targets": [
            {
                "name": "jaxsim front / Gymnasium numpy at N=4096, at least 1",
                "configuration": config,
                "value": row["front_over_numpy"],
                "met": row["front_over_numpy"] >= 1.0,
            }
            for config, child in children.items()
            for row in child["rows"]
            if row["num_envs"] == 4096
        ],
        "table": table,
    }
    return finish(record, args.out or default_out("gymnasium_front", args.quick), "")


if __name__ == "__main__":
    sys.exit(main())
