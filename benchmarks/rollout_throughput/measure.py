"""Random-policy env-steps/s vs num_envs: jaxsim's scan backend beside CPU simulators and JAX peers.

Usage:
  python -m benchmarks.rollout_throughput.measure             # CartPole, N = 1 ... 65536
  python -m benchmarks.rollout_throughput.measure --envs all  # all five environments
  python -m benchmarks.rollout_throughput.measure --quick     # N <= 4096, ~1-3 min on 2 cores
  python -m benchmarks.rollout_throughput.measure --num-envs 1,16 --repeats 3 --out x.json

Implementations (each where it is installed and provides the environment, else recorded as
skipped with the reason): jaxsim (recording the full Trajectory, and with outputs="rewards",
which shows what recording costs); Gymnasium SyncVectorEnv, AsyncVectorEnv and numpy-vectorized
CartPole; EnvPool; gymnax; an eager-PyTorch CartPole (benchmarks/baselines/torch_cartpole.py);
and jaxsim's CartPole physics alone, the floor.

Every implementation runs in this one process, interleaved per batch size so that load from
elsewhere hits them alike; compare the ratios, not the absolute figures, across runs. Before any
timing, each is checked against jaxsim's `env.step` from the same states with the same actions
(EnvPool, which cannot be set to a state, statistically), and every timed call is checked for
dropped steps. Each is compiled and warmed up untimed, then timed as the median of `--repeats`
samples of at least `--min-time` seconds. The JSON record (provenance, checks, per-implementation
compile time and median/min/max throughput, target ratios at 4096 envs) is written atomically;
records of finished measurements go to a `.partial.jsonl` beside it while the run is in
progress, so an interrupted run keeps them.

Memory floor: each jaxsim row (and the physics-only row) also records the bytes an env-step must
move (state read and written, outputs written; `floor.step_bytes`, from traced shapes) and this
machine's copy bandwidth, measured in the same run before and after the rows; their quotient is
the most env-steps/s memory allows, and each figure is recorded as a fraction of it.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import itertools
import os
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from atomicfiles import finite_json
from benchmarks.baselines import torch_cartpole as baselines
from benchmarks.harness.arguments import count, int_list, name_list
from benchmarks.harness.formatting import format_rate
from benchmarks.harness.optional import Skipped, not_measured
from benchmarks.harness.provenance import provenance
from benchmarks.harness.record import append_jsonl, default_out, finish
from benchmarks.rollout_throughput.baseline_runners import (
    bench_envpool,
    bench_gymnasium_async,
    bench_gymnasium_numpy,
    bench_gymnasium_sync,
    bench_gymnax,
    bench_torch,
)
from benchmarks.rollout_throughput.config import ENV_ID, ENV_IDS, Config, Measured
from benchmarks.rollout_throughput.floor import add_floors, copy_bandwidth, merged_bandwidth
from benchmarks.rollout_throughput.jaxsim_runners import (
    bench_jaxsim,
    bench_physics_only,
    check_jaxsim_episode_length,
    check_physics_only,
    gymnasium_episode_length,
)
from benchmarks.rollout_throughput.targets import evaluate_targets

FULL_NUM_ENVS = (1, 16, 256, 4096, 65536)
QUICK_NUM_ENVS = (1, 16, 256, 4096)
BASELINE_PACKAGES = ("gymnasium", "gymnax", "envpool", "torch")


# ------------------------------------------------------------------------------ implementations
IMPLS: dict[str, tuple[str, Callable[[str, int, Config], Measured]]] = {
    "jaxsim": ("jaxsim.rollout, scan backend (records the full Trajectory)", bench_jaxsim),
    # The same rollout written into the previous call's buffers (rollout(..., out=previous)).
    "jaxsim_reuse": (
        "jaxsim.rollout, scan backend, full Trajectory written into the previous call's "
        "buffers (out=, donated)",
        functools.partial(bench_jaxsim, reuse=True),
    ),
    # What recording the full Trajectory costs, in the same run: reward and flags only.
    "jaxsim_rewards": (
        "jaxsim.rollout, scan backend, outputs='rewards' (reward, terminated, truncated)",
        functools.partial(bench_jaxsim, outputs="rewards"),
    ),
    # Gymnasium's and EnvPool's default NEXT_STEP auto-reset spends one step per episode on the
    # reset; those steps are counted, as they count them.
    "gymnasium_sync": ("Gymnasium SyncVectorEnv of gym.make envs", bench_gymnasium_sync),
    "gymnasium_async": (
        "Gymnasium AsyncVectorEnv of gym.make envs, one process each",
        bench_gymnasium_async,
    ),
    "gymnasium_numpy": (
        "Gymnasium numpy CartPoleVectorEnv (vector_entry_point)",
        bench_gymnasium_numpy,
    ),
    "envpool": ("EnvPool (C++ thread pool), synchronous, gymnasium API", bench_envpool),
    "gymnax": ("gymnax jit(scan(vmap(step))), key per env per step", bench_gymnax),
    "torch": (
        "eager PyTorch CartPole on [num_envs, 4] tensors, rollout buffer (CPU)",
        bench_torch,
    ),
    "physics_only": (
        "jaxsim CartPole dynamics, balancing law: no RNG, reset or records",
        bench_physics_only,
    ),
}
# The dynamics check that covers each implementation (None: checked by other means).
DYNAMICS_CHECK_OF = {
    "jaxsim": "gymnasium",  # jaxsim against Gymnasium, transition by transition
    "jaxsim_reuse": "gymnasium",
    "jaxsim_rewards": "gymnasium",
    "gymnasium_sync": "gymnasium",
    "gymnasium_async": "gymnasium",
    "gymnasium_numpy": "gymnasium_numpy",
    "envpool": "envpool_statistics",
    "gymnax": "gymnax",
    "torch": "torch",
    "physics_only": None,  # check_physics_only
}
# Checks of peers: one that fails is flagged in the record (the peer is still measured). Every
# other check covers code in this repository (jaxsim against Gymnasium included) and fails the run.
PEER_CHECKS = ("gymnax", "gymnasium_numpy", "envpool_statistics")


def measure(impl: str, num_envs: int, cfg: Config, env_id: str = ENV_ID) -> dict[str, Any]:
    description, bench = IMPLS[impl]
    record: dict[str, Any] = {
        "impl": impl,
        "env_id": env_id,
        "num_envs": num_envs,
        "description": description,
    }
    started = time.perf_counter()
    try:
        m = bench(env_id, num_envs, cfg)
    except Exception as e:
        return not_measured(record, e)
    record["wall_s"] = round(time.perf_counter() - started, 2)  # setup, checks and timing
    t = m.timing
    rate = m.steps_per_call / np.asarray(t.samples_s)
    return {
        **record,
        "status": "ok",
        "steps_per_call": m.steps_per_call,
        "steps_per_s": {
            "median": m.steps_per_call / t.median_s,
            "min": float(rate.min()),
            "max": float(rate.max()),
            "samples": rate.tolist(),
        },
        "compile_s": t.compile_s,
        "first_call_s": t.first_call_s,
        "first_call_cpu_s": t.first_call_cpu_s,
        "setup_s": m.setup_s,
        "timing": t.to_dict(),
        "checks": m.checks,
        "notes": m.notes,
        "loadavg_1min_after": round(os.getloadavg()[0], 2),
    }


def dynamics_checks(env_id: str, impls: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """The dynamics checks the chosen implementations need, keyed "<env_id>/<check>_dynamics".

    A check whose package is missing is left out (its implementation is skipped anyway).
    """
    wanted = {DYNAMICS_CHECK_OF[i] for i in impls} - {None}
    out: dict[str, dict[str, Any]] = {}
    ref = None
    for name in sorted(wanted):
        try:
            baselines.check_available(name, env_id)
            if name != "envpool_statistics" and ref is None:
                ref = baselines.reference_transitions(env_id)
            if name == "envpool_statistics":
                stats = baselines.envpool_statistics(env_id)
                result = baselines.statistics_check(baselines.jaxsim_statistics(env_id), stats)
            else:
                result = baselines.DYNAMICS_CHECKS[name](env_id, ref)
        except Skipped:
            continue
        except Exception as e:
            traceback.print_exc()
            result = {"pass": False, "reason": f"{type(e).__name__}: {e}"}
        out[f"{env_id}/{name}_dynamics"] = result
    return out


def parse_args(argv=None) -> tuple[Config, Path]:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.rollout_throughput.measure",
        description=__doc__.splitlines()[0],
    )
    p.add_argument(
        "--quick", action="store_true", help=f"N in {QUICK_NUM_ENVS}, shorter samples (same method)"
    )
    p.add_argument(
        "--envs",
        type=name_list(ENV_IDS, "environment(s)"),
        default=(ENV_ID,),
        help=f"comma-separated subset of {list(ENV_IDS)}, or 'all' (default {ENV_ID})",
    )
    p.add_argument(
        "--num-envs",
        type=int_list,
        default=None,
        help=f"comma-separated batch sizes (default {FULL_NUM_ENVS})",
    )
    p.add_argument("--repeats", type=count, default=3, help="timed samples per measurement")
    p.add_argument(
        "--min-time",
        type=float,
        default=None,
        help="minimum seconds per sample (default 1.0; 0.2 with --quick)",
    )
    p.add_argument(
        "--steps-per-call",
        type=int,
        default=None,
        help="env-steps per jaxsim call (default 2**21; 2**18 with --quick)",
    )
    p.add_argument(
        "--impls",
        type=name_list(list(IMPLS), "implementation(s)"),
        default=tuple(IMPLS),
        help=f"comma-separated subset of {list(IMPLS)}, or 'all'",
    )
    p.add_argument(
        "--async-max-envs",
        type=int,
        default=16,
        help="largest N for AsyncVectorEnv (one process per env)",
    )
    p.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="intra-op threads of the PyTorch baseline (0: torch's default, one per core)",
    )
    p.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = p.parse_args(argv)
    cfg = Config(
        num_envs=args.num_envs or (QUICK_NUM_ENVS if args.quick else FULL_NUM_ENVS),
        repeats=args.repeats,
        min_time=args.min_time if args.min_time is not None else (0.2 if args.quick else 1.0),
        steps_per_call=args.steps_per_call or (2**18 if args.quick else 2**21),
        quick=args.quick,
        impls=args.impls,
        envs=args.envs,
        async_max_envs=args.async_max_envs,
        torch_threads=args.torch_threads,
    )
    out = args.out or default_out("rollout_throughput", args.quick)
    return cfg, out


def main(argv=None) -> int:
    cfg, out = parse_args(argv)
    started = time.perf_counter()
    prov = provenance(packages=BASELINE_PACKAGES)
    partial = out.with_name(out.stem + ".partial.jsonl")
    partial.unlink(missing_ok=True)
    print(
        f"rollout throughput of {', '.join(cfg.envs)} on {prov['device_kind']} "
        f"({prov['cpu_model']}, {prov['cpu_count']} cores, load {prov['loadavg_1_5_15min']}); "
        f"commit {prov['commit']}",
        flush=True,
    )

    checks: dict[str, Any] = {}

    def add_checks(new: dict[str, Any]) -> None:
        for name, c in new.items():
            checks[name] = c
            summary = {k: v for k, v in c.items() if k not in ("jaxsim", "baseline", "tolerance")}
            print(f"check {name}: {'pass' if c['pass'] else 'FAIL'} {summary}", flush=True)

    if "jaxsim" in cfg.impls and ENV_ID in cfg.envs:
        add_checks(
            {"jaxsim_episode_length": check_jaxsim_episode_length(gymnasium_episode_length())}
        )
    if "physics_only" in cfg.impls and ENV_ID in cfg.envs:
        add_checks({"physics_only_matches_env_step": check_physics_only()})
    for env_id in cfg.envs:
        add_checks(dynamics_checks(env_id, cfg.impls))

    # The memory floor's bandwidth, measured before and after the rows so load drift shows.
    bandwidths = [copy_bandwidth(repeats=3 if cfg.quick else 7)]
    print(f"copy bandwidth {bandwidths[0]['bytes_per_s'] / 1e9:.2f} GB/s", flush=True)
    records = []
    total = len(cfg.envs) * len(cfg.num_envs) * len(cfg.impls)
    for env_id, num_envs in itertools.product(cfg.envs, cfg.num_envs):
        for impl in cfg.impls:
            r = measure(impl, num_envs, cfg, env_id=env_id)
            check = DYNAMICS_CHECK_OF[impl]
            if check is not None and f"{env_id}/{check}_dynamics" in checks:
                r["dynamics_check"] = f"{env_id}/{check}_dynamics"
                r["dynamics_pass"] = checks[r["dynamics_check"]]["pass"]
            records.append(r)
            append_jsonl(partial, finite_json(r))
            if r["status"] == "ok":
                note = f"{format_rate(r['steps_per_s']['median'])} env-steps/s"
                if r["compile_s"] is not None:
                    note += f", compile {r['compile_s']:.2f} s"
                if r.get("dynamics_pass") is False:
                    note += " (dynamics differ from jaxsim: see checks)"
            else:
                note = f"{r['status']}: {r['reason']}"
            print(
                f"  [{len(records)}/{total}] {env_id} N={num_envs:<6} {impl:<16} {note}", flush=True
            )

    bandwidths.append(copy_bandwidth(repeats=3 if cfg.quick else 7))
    bandwidth = merged_bandwidth(bandwidths)
    add_floors(records, bandwidth["bytes_per_s"])
    targets = evaluate_targets(records)
    result = {
        "benchmark": "rollout_throughput",
        "env_id": ENV_ID if cfg.envs == (ENV_ID,) else None,
        "env_ids": list(cfg.envs),
        "policy": "random",
        "unit": "env-steps/s",
        "provenance": prov,
        "config": dataclasses.asdict(cfg),
        "loadavg_1_5_15min_end": [round(x, 2) for x in os.getloadavg()],
        "wall_s": round(time.perf_counter() - started, 1),
        "checks": checks,
        "memory_bandwidth": bandwidth,
        "targets": targets,
        "results": records,
    }
    failed = [(r["impl"], r["env_id"], r["num_envs"]) for r in records if r["status"] == "failed"]
    # A peer whose dynamics differ from jaxsim's is flagged in the record; ours must pass.
    failed += [
        name
        for name, c in checks.items()
        if not c["pass"] and not any(name.endswith(f"/{p}_dynamics") for p in PEER_CHECKS)
    ]
    return finish(result, out, None, failed, partial)


if __name__ == "__main__":
    raise SystemExit(main())
