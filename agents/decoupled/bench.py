"""`python -m agents.decoupled.bench`: decoupled vs synchronous env-steps/s on host simulators.

`measure_decoupled()` runs, in one process and for each environment, PPO's learner fed by
actor threads under each arrangement, several times: `sync` with one actor (step, then learn:
the plain loop), `sync` with the decoupled run's actors (acting in parallel threads, learning
apart), `reproducible` and `free`. Throughput is env steps learned per second from the end of
update `warmup` to the last update (compile, first segments and thread start-up apart); each
figure is the median of `repeats`. The load average is recorded beside it (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys

import jax
import numpy as np

from agents.decoupled.host_envs import make_pool
from agents.decoupled.learner import HostPPO
from agents.decoupled.run import DecoupledConfig, run_decoupled
from agents.ppo import PPOConfig
from atomicfiles import finite_json, write_json_atomic

ARRANGEMENTS = (("sync", 1), ("sync", None), ("reproducible", None), ("free", None))
"""(schedule, actors; None: the measured run's `actors`)."""


def default_envs() -> list[str]:
    """CartPole through EnvPool (Gymnasium without it) and MinAtar Breakout (original package)."""
    try:
        import envpool  # noqa: F401

        cartpole = "envpool/CartPole-v1"
    except ImportError:
        cartpole = "gymnasium/CartPole-v1"
    return [cartpole, "gymnasium/MinAtar/Breakout-v0"]


ACTING = ("policy", "env", "record")  # an actor's phases that are acting, not waiting


def overlap_bound(profile: list[dict], cores: int) -> dict[str, float]:
    """What overlapping acting with learning can give at most, from the synchronous loop's own
    profile (one actor: the learner waits while it acts, it waits while the learner learns).

    - `phases`: (acting + learning) / max(acting, learning), the speed-up if each side went
      on as fast beside the other as alone, never waiting;
    - `cores`: cores / (the process's CPU seconds per wall second), the speed-up if the loop
      kept every core as busy as it keeps those it uses now;
    - `bound`: the smaller. A decoupled run on these cores cannot pass it; the two sides also
      slow each other down when they share the cores, so it is an upper bound."""
    learner, actor = profile[0], profile[1]
    learn = learner["phases_s"].get("learn", 0.0)
    acting = sum(actor["phases_s"].get(p, 0.0) for p in ACTING)
    phases = (learn + acting) / max(learn, acting, 1e-12)
    cpu_per_wall = learner["process_cpu_s"] / max(learner["wall_s"], 1e-12)
    by_cores = cores / max(cpu_per_wall, 1e-12)
    return {
        "learn_s": learn,
        "acting_s": acting,
        "phases": phases,
        "cpu_per_wall": cpu_per_wall,
        "cores": by_cores,
        "bound": min(phases, by_cores),
    }


def _throughput(config: PPOConfig, times: list[float], warmup: int) -> float:
    steps = (len(times) - warmup) * config.batch_size
    return steps / (times[-1] - times[warmup - 1])


def measure_decoupled(
    envs: list[str] | None = None,
    config: PPOConfig | None = None,
    actors: int = 2,
    updates: int = 12,
    warmup: int = 3,
    repeats: int = 3,
    seed: int = 0,
    envpool_threads: int = 0,
) -> dict:
    """Env-steps/s of each arrangement on each env, medians of `repeats`, and their ratios.

    Returns {"envs": {env: {"sps": {arrangement: median}, "runs": {...: [each repeat]},
    "ratio": {decoupled arrangement: its median / sync-1-actor median, ...}}}, "config": ...,
    "load_average": [before, after], ...}.
    """
    envs = envs or default_envs()
    config = config or PPOConfig(
        total_steps=32 * 64 * updates,
        num_envs=32,
        num_steps=64,
        update_epochs=10,
        num_minibatches=4,
    )
    if updates <= warmup or config.num_updates < updates:
        raise ValueError(
            f"updates={updates} must exceed warmup={warmup} and fit config.num_updates="
            f"{config.num_updates}"
        )
    load_before = os.getloadavg()
    results = {}
    for env_id in envs:
        probe = make_pool(env_id, 1, seed)
        spaces = probe.observation_space, probe.action_space
        probe.close()
        learners = {v: HostPPO(config, *spaces, env_id, vtrace=v) for v in (False, True)}
        runs: dict[str, list[float]] = {}
        profiles: dict[str, list] = {}  # the last repeat's, per thread: where the time went
        bounds: list[dict] = []  # each repeat's sync-1actor overlap bound
        for _ in range(repeats):
            for schedule, n_actors in ARRANGEMENTS:
                n_actors = n_actors or actors
                name = f"{schedule}-{n_actors}actor"
                learner = learners[schedule == "free"]
                dc = DecoupledConfig(
                    env_id, schedule, n_actors, seed=seed, envpool_threads=envpool_threads
                )
                state = learner.init(jax.random.key(seed))
                result = run_decoupled(learner, dc, state, updates, profile_after=warmup)
                runs.setdefault(name, []).append(_throughput(config, result.update_times, warmup))
                profiles[name] = result.profile
                if name == "sync-1actor":
                    bounds.append(overlap_bound(result.profile, os.cpu_count() or 1))
        sps = {k: float(np.median(v)) for k, v in runs.items()}
        base = sps["sync-1actor"]
        results[env_id] = {
            "sps": sps,
            "runs": runs,
            "profiles": profiles,
            "ratio_to_sync_1actor": {k: v / base for k, v in sps.items()},
            "ratio_to_sync_same_actors": {
                k: v / sps[f"sync-{actors}actor"] for k, v in sps.items() if "sync" not in k
            },
            # The most a decoupled arrangement can gain over sync-1actor on these cores:
            # medians over the repeats of `overlap_bound`'s parts, and each repeat's.
            "overlap_bound": {k: float(np.median([b[k] for b in bounds])) for k in bounds[0]}
            | {"runs": bounds},
        }
    return {
        "envs": results,
        "config": config.to_dict(),
        "actors": actors,
        "updates": updates,
        "warmup": warmup,
        "repeats": repeats,
        "envpool_threads": envpool_threads,
        "xla_flags": os.environ.get("XLA_FLAGS"),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "cpus": os.cpu_count(),
        "machine": platform.node(),
        "jax": jax.__version__,
        "device": jax.devices()[0].device_kind,
        "commit": _commit(),
    }


def _commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True)
        return out.stdout.strip() or None
    except OSError:
        return None


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m agents.decoupled.bench", description=__doc__)
    p.add_argument("--env", action="append", help="host env id (repeatable; default: both)")
    p.add_argument("--actors", type=int, default=2)
    p.add_argument("--updates", type=int, default=12)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    # Sizes where acting and learning take comparable time on a 2-core CPU (profiles in the
    # record): with 8 envs the loop is all policy dispatch and there is little to overlap.
    p.add_argument("--num-envs", type=int, default=32)
    p.add_argument("--num-steps", type=int, default=64)
    p.add_argument("--update-epochs", type=int, default=10)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--envpool-threads", type=int, default=0, help="per pool (0: EnvPool's)")
    p.add_argument("--out", default=None, help="write the JSON record here")
    args = p.parse_args(argv)
    config = PPOConfig(
        total_steps=args.num_envs * args.num_steps * args.updates,
        num_envs=args.num_envs,
        num_steps=args.num_steps,
        update_epochs=args.update_epochs,
        num_minibatches=args.num_minibatches,
    )
    record = measure_decoupled(
        args.env,
        config,
        args.actors,
        args.updates,
        args.warmup,
        args.repeats,
        envpool_threads=args.envpool_threads,
    )
    record["command"] = " ".join(["python -m agents.decoupled.bench", *(argv or sys.argv[1:])])
    for env_id, r in record["envs"].items():
        print(f"{env_id}:")
        for name, sps in r["sps"].items():
            print(f"  {name:<22} {sps:10,.0f} env-steps/s  x{r['ratio_to_sync_1actor'][name]:.2f}")
        b = r["overlap_bound"]
        print(
            f"  at most x{b['bound']:.2f} over sync-1actor: acting {b['acting_s']:.2f} s, "
            f"learning {b['learn_s']:.2f} s (x{b['phases']:.2f} if they overlapped freely); "
            f"CPU/wall {b['cpu_per_wall']:.2f} of {os.cpu_count()} cores (x{b['cores']:.2f})"
        )
    print(
        f"load average before {record['load_average_before']}, after {record['load_average_after']}"
    )
    if args.out:
        write_json_atomic(args.out, finite_json(record))
    return record


if __name__ == "__main__":
    main()
