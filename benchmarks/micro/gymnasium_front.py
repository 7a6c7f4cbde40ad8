"""jaxsim's Gymnasium fronts against Gymnasium's own: the vector env, and one env through gym.make.

Usage:
  python -m benchmarks.micro.gymnasium_front                # N = 16, 256, 4096; every configuration
  python -m benchmarks.micro.gymnasium_front --quick        # shorter samples (~1 min on 2 cores)
  python -m benchmarks.micro.gymnasium_front --num-envs 16,4096 --configs sync --out x.json
  python -m benchmarks.micro.gymnasium_front --configs single  # one env only

Single environment ("single"): `gym.make("jaxsim/<id>")` against `gym.make("<id>")` for
CartPole-v1 and Pendulum-v1, one environment each, as CleanRL-style code steps it: the same
pre-drawn actions from Gymnasium's action space, `reset()` when an episode ends (its cost is part
of a step's, on both sides), Gymnasium's default wrappers on both. Per repeat each side runs the
same steps in turn (the first alternating), and the figure is the median over repeats of the
paired ratio of per-step times, so load drift falls on both alike. It runs in its own child
process, dispatch as importing `jaxsim.gymnasium` leaves it. Target: at most 2x Gymnasium's step.

Both sides are stepped the same way, by the throughput suite's Gymnasium vector loop
(`benchmarks.rollout_throughput.baseline_runners.bench_gymnasium_vector`):
`gymnasium.make_vec(id, num_envs=N, vectorization_mode="vector_entry_point")`, uniform random
numpy actions in, numpy observations, rewards and flags out, every step (NEXT_STEP autoreset,
both sides' default). jaxsim's side is `jaxsim/CartPole-v1`, Gymnasium's is `CartPole-v1`
(`gymnasium.envs.classic_control.cartpole.CartPoleVectorEnv`).

JAX's CPU client runs computations asynchronously unless `jax_cpu_enable_async_dispatch` is off,
a process-wide flag read once, when the CPU backend starts; the front turns it off only when
asked (`jaxsim.gymnasium.cpu_dispatch(sync=True)`, before JAX starts). Each configuration is
therefore measured in its own child process: "sync", the front's opt-in, "async", JAX's
default, "sync-1core", "sync" with the process pinned to one core (XLA splits
its larger loops across the CPU's threads; on cores other processes keep busy, the hand-offs
cost more than the split saves), and "sync-1thread", "sync" on every core with XLA's CPU pool
sized to one thread by the opt-in `jaxsim.gymnasium.set_cpu_threads(1)`. Both sides run in
every child, interleaved sample by sample, so each ratio compares like with like.
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

from atomicfiles import write_json_atomic
from benchmarks.harness.formatting import format_rate, format_table
from benchmarks.harness.paths import REPO_ROOT
from benchmarks.harness.provenance import provenance
from benchmarks.harness.record import default_out, finish

ENV_ID = "CartPole-v1"
# configuration -> (CPU dispatch, pinned to one core, jaxsim.gymnasium.set_cpu_threads(1))
CONFIGS = {
    "async": ("async", False, False),
    "sync": ("sync", False, False),
    "sync-1core": ("sync", True, False),
    "sync-1thread": ("sync", False, True),
}
SIDES = ("jaxsim_front", "gymnasium_numpy")
SINGLE = "single"  # the single-environment configuration: its own child process
SINGLE_ENV_IDS = ("CartPole-v1", "Pendulum-v1")
SINGLE_TARGET = 2.0  # jaxsim's step time / Gymnasium's, at most


def measure_single(env_id: str, steps: int, repeats: int) -> dict:
    """One `gym.make` env of each side: per-step seconds per repeat, and their paired ratios."""
    import time

    import gymnasium as gym

    import jaxsim.gymnasium  # noqa: F401 (registers jaxsim/<id>)

    envs = {"jaxsim": gym.make(f"jaxsim/{env_id}"), "gymnasium": gym.make(env_id)}
    space = envs["gymnasium"].action_space
    space.seed(0)
    actions = [space.sample() for _ in range(steps)]  # drawing them is no part of a step
    if envs["jaxsim"].action_space != space:
        raise AssertionError(f"{env_id}: action spaces differ: {envs['jaxsim'].action_space}")
    episodes = dict.fromkeys(envs, 0)

    def run(side: str) -> float:
        env, ended = envs[side], 0
        t0 = time.perf_counter()
        for a in actions:
            obs, reward, terminated, truncated, _ = env.step(a)
            if terminated or truncated:
                env.reset()
                ended += 1
        seconds = (time.perf_counter() - t0) / steps
        if not (env.observation_space.contains(obs) and np.isfinite(reward)):
            raise AssertionError(f"{side} {env_id}: a step left {obs!r}, reward {reward!r}")
        episodes[side] += ended
        return seconds

    for side, env in envs.items():
        env.reset(seed=0)
        run(side)  # untimed: compile, first calls, Gymnasium's one-off env checks
    per_step: dict[str, list[float]] = {side: [] for side in envs}
    ratios = []
    for r in range(repeats):
        for side in ("jaxsim", "gymnasium") if r % 2 == 0 else ("gymnasium", "jaxsim"):
            per_step[side].append(run(side))
        ratios.append(per_step["jaxsim"][-1] / per_step["gymnasium"][-1])
    for env in envs.values():
        env.close()
    ratio = float(np.median(ratios))
    print(f"{env_id} single env: jaxsim / Gymnasium step time = {ratio:.2f}x", flush=True)
    return {
        "env_id": env_id,
        "steps_per_repeat": steps,
        "episodes_ended": episodes,
        "step_s": {
            side: {"median": float(np.median(v)), "samples": v} for side, v in per_step.items()
        },
        "ratio_samples": ratios,
        "jaxsim_over_gymnasium": ratio,
    }


def run_single_child(steps: int, repeats: int) -> dict:
    import jax

    import jaxsim.gymnasium

    jaxsim.gymnasium.cpu_dispatch(sync=True)  # the front's opt-in: JAX has not started yet
    return {
        "async_dispatch": bool(jax.config.read("jax_cpu_enable_async_dispatch")),
        "cores": sorted(os.sched_getaffinity(0)),
        "front_dispatch": jaxsim.gymnasium.cpu_dispatch(),
        "single_env": [measure_single(env_id, steps, repeats) for env_id in SINGLE_ENV_IDS],
    }


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
    dispatch, one_core, one_thread = CONFIGS[config]
    if one_core:  # before JAX starts its thread pools
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    if one_thread:  # the documented opt-in, before JAX's first computation; both cores allowed
        from jaxsim.gymnasium import set_cpu_threads

        set_cpu_threads(1)
    import gymnasium as gym
    import jax

    import jaxsim.gymnasium

    jaxsim.gymnasium.cpu_dispatch(sync=dispatch != "async")  # before JAX's first computation
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
        "nproc_env": os.environ.get("NPROC"),  # XLA's CPU pool size, when set
        "front_dispatch": jaxsim.gymnasium.cpu_dispatch(),
        "rows": rows,
    }


def _spawn(config: str, args) -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"{config}.json"
        command = [
            sys.executable, "-m", "benchmarks.micro.gymnasium_front", "--child-out", str(out),
            "--configs", config, "--num-envs", ",".join(map(str, args.num_envs)),
            "--repeats", str(args.repeats),
            "--single-steps", str(args.single_steps), *(["--quick"] if args.quick else []),
        ]  # fmt: skip
        subprocess.run(command, cwd=REPO_ROOT, env=env, check=True)
        result = json.loads(out.read_text())
    expected_async = config in CONFIGS and CONFIGS[config][0] == "async"
    if result["async_dispatch"] != expected_async:
        raise AssertionError(
            f"{config}: the child ran with async_dispatch={result['async_dispatch']}"
        )
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="shorter samples")
    p.add_argument("--num-envs", default="16,256,4096", help="comma-separated batch sizes")
    p.add_argument("--repeats", type=int, default=5, help="samples per side and N (median)")
    p.add_argument(
        "--configs",
        default=",".join([*CONFIGS, SINGLE]),
        help=f"configurations to measure, from {[*CONFIGS, SINGLE]}",
    )
    p.add_argument(
        "--single-steps", type=int, default=None, help="steps per side and repeat, single env"
    )
    p.add_argument("--out", type=Path, default=None, help="JSON output path")
    p.add_argument("--child-out", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.num_envs = [int(x) for x in args.num_envs.split(",")]
    if args.single_steps is None:
        args.single_steps = 1000 if args.quick else 4000
    configs = args.configs.split(",")
    if any(c not in (*CONFIGS, SINGLE) for c in configs) or any(n < 1 for n in args.num_envs):
        p.error(f"--configs takes names from {[*CONFIGS, SINGLE]}; --num-envs positive integers")
    if args.repeats < 1 or args.single_steps < 1:
        p.error(
            f"--repeats and --single-steps must be >= 1, got {args.repeats}, {args.single_steps}"
        )
    min_time = 0.1 if args.quick else 0.4
    if args.child_out is not None:
        if configs[0] == SINGLE:
            result = run_single_child(args.single_steps, args.repeats)
        else:
            result = run_child(configs[0], args.num_envs, args.repeats, min_time, args.quick)
        write_json_atomic(args.child_out, result)
        return 0
    prov = provenance(["gymnasium"])  # before the children: its load average is the start's
    children = {config: _spawn(config, args) for config in configs if config != SINGLE}
    single = _spawn(SINGLE, args) if SINGLE in configs else None
    table = ""
    if children:
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
    if single is not None:
        single_table = format_table(
            ["single env", "jaxsim step", "Gymnasium step", "jaxsim / Gymnasium (paired median)"],
            [
                [
                    m["env_id"],
                    f"{1e6 * m['step_s']['jaxsim']['median']:.1f} us",
                    f"{1e6 * m['step_s']['gymnasium']['median']:.1f} us",
                    f"{m['jaxsim_over_gymnasium']:.2f}x",
                ]
                for m in single["single_env"]
            ],
        )
        table = f"{table}\n\n{single_table}" if children else single_table
    print(table)
    targets = [
        {
            "name": "jaxsim front / Gymnasium numpy at N=4096, at least 1",
            "configuration": config,
            "value": row["front_over_numpy"],
            "met": row["front_over_numpy"] >= 1.0,
        }
        for config, child in children.items()
        for row in child["rows"]
        if row["num_envs"] == 4096
    ]
    for m in single["single_env"] if single is not None else ():
        met = m["jaxsim_over_gymnasium"] <= SINGLE_TARGET
        targets.append(
            {
                "name": f"{m['env_id']} single-env step time, jaxsim / Gymnasium, at most "
                f"{SINGLE_TARGET:g}",
                "configuration": SINGLE,
                "value": m["jaxsim_over_gymnasium"],
                "max": SINGLE_TARGET,
                "met": met,
                "status": "pass" if met else "fail",
            }
        )
    record = {
        "benchmark": "gymnasium_front",
        "env_id": ENV_ID,
        "quick": args.quick,
        "provenance": prov,
        "note": (
            "env-steps/s through gymnasium.make_vec(..., vectorization_mode='vector_entry_point')"
            ", random numpy actions in and numpy arrays out every step, NEXT_STEP autoreset; "
            "median of interleaved samples; each configuration in its own process "
            "(sync: as importing jaxsim.gymnasium leaves it); single_env: one gym.make env "
            "per side, seconds per step, median of paired per-repeat ratios"
        ),
        "configurations": children,
        "single_env": single,
        "loadavg_1_5_15min_end": [round(x, 2) for x in os.getloadavg()],
        "targets": targets,
        "table": table,
    }
    return finish(record, args.out or default_out("gymnasium_front", args.quick), "")


if __name__ == "__main__":
    sys.exit(main())
