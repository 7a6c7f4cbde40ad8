"""Rollout env-steps/s against device count: the batch split over a mesh (`rollout(mesh=)`).

Usage:
  python -m benchmarks.scaling.measure                 # CPU: 1 and 2 forced host devices
  python -m benchmarks.scaling.measure --quick         # fewer steps and repeats
  python -m benchmarks.scaling.measure --devices 1,2,4 --num-envs 65536 --out x.json

Each device count runs in its own process: on a CPU with
XLA_FLAGS=--xla_force_host_platform_device_count=D (the flag must be set before jax starts, and
one device per core is the fair split), on an accelerator with the first D real devices. Each
process times, for a fresh key per call, `jaxsim.rollout(env, "random", n, num_envs=N,
outputs="rewards", mesh=...)` on a mesh of its D devices (axis `jaxsim.ENV_AXIS`) and, beside it,
the same rollout with mesh=None. Before timing it checks that the mesh rollout's outputs are
split over the devices and equal the unsharded one's (flags exactly, rewards to float rounding)
on all but a share MAX_MISMATCH of the entries, and records that share. It also times a loop
of n steps doing only what the lazy reset's `any done` costs on a mesh (a max over the split
batch, one small all-reduce a step, plus an elementwise add), so the collective's share of a
step can be read off. Target on a 2-core CPU: 2 devices >= 1.8x one.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding

import jaxsim
from benchmarks.harness.arguments import int_list, split_list
from benchmarks.harness.paths import child_env
from benchmarks.harness.provenance import provenance
from benchmarks.harness.record import default_out, finish
from benchmarks.harness.timing import time_fn


def _mesh(devices: int) -> Mesh:
    return Mesh(np.array(jax.devices()[:devices]), (jaxsim.ENV_AXIS,))


# The partitioned program rounds some floats differently in the last bit (XLA fuses it
# otherwise); CartPole's dynamics grow such a bit until, rarely, a termination flips. Measured:
# 5 of 8.4M flags at 2^17 environments x 64 steps. More than this share is a bug.
MAX_MISMATCH = 1e-4
CPU_TARGET = 1.8  # env-steps/s of 2 devices over one device, on a 2-core CPU


def _check_against_unsharded(env, n, num_envs, backend, mesh) -> dict:
    """The mesh rollout against mesh=None for one key: the share of (step, env) entries whose
    flags differ or whose reward is not close (a flipped episode end changes what follows)."""
    kw = dict(num_envs=num_envs, key=jax.random.key(0), outputs="rewards", backend=backend)
    a = jaxsim.rollout(env, "random", n, **kw)
    b = jaxsim.rollout(env, "random", n, mesh=mesh, **kw)
    shard = b.reward.sharding.shard_shape(b.reward.shape)
    if shard != (n, num_envs // mesh.size):
        raise AssertionError(f"mesh rollout's rewards are not split: {b.reward.sharding}")
    flags = (np.asarray(a.terminated) != np.asarray(b.terminated)) | (
        np.asarray(a.truncated) != np.asarray(b.truncated)
    )
    rewards = ~np.isclose(np.asarray(a.reward), np.asarray(b.reward), rtol=1e-5, atol=1e-5)
    share = {"flags": float(flags.mean()), "rewards": float(rewards.mean())}
    if max(share.values()) > MAX_MISMATCH:
        raise AssertionError(f"mesh rollout differs from mesh=None on {share} of the entries")
    return {"mismatch_share": share, "check_steps": n}


def _time_rollout(env, n, num_envs, backend, mesh, repeats, min_time) -> dict:
    counter = iter(range(1, 1 << 30))

    def run():
        key = jax.random.key(next(counter))
        return jaxsim.rollout(
            env, "random", n, num_envs=num_envs, key=key, outputs="rewards", backend=backend,
            mesh=mesh,
        )  # fmt: skip

    def check(out):
        if out.reward.shape != (n, num_envs) or not np.isfinite(np.asarray(out.reward)).all():
            raise AssertionError(f"bad rewards of shape {out.reward.shape}")

    timing = time_fn(run, repeats=repeats, min_time=min_time, check=check)
    return timing.to_dict() | {"env_steps_per_s": n * num_envs / timing.median_s}


def _time_any_done(n, num_envs, mesh, repeats, min_time) -> dict:
    """n steps of the lazy reset's predicate alone: max over the batch, then an elementwise add."""

    @jax.jit
    def loop(x):
        def body(x, _):
            any_done = jnp.max(x) > 0  # on a mesh: a local max, then an all-reduce
            return x + any_done.astype(jnp.int32), None

        return jax.lax.scan(body, x, None, length=n)[0]

    split = NamedSharding(mesh, jaxsim.sharding.batch_spec())
    x = jax.device_put(jnp.zeros((num_envs,), jnp.int32), split)
    timing = time_fn(lambda: loop(x), repeats=repeats, min_time=min_time)
    return timing.to_dict() | {"step_us": 1e6 * timing.median_s / n}


def child(args) -> dict:
    """One device count, measured in this process."""
    devices = args.child
    if devices > jax.device_count():
        raise SystemExit(f"--devices {devices}: this process sees {jax.device_count()} devices")
    mesh = _mesh(devices)
    rows = []
    for env_id in split_list(args.envs):
        env = jaxsim.make(env_id)
        for backend in split_list(args.backends):
            check = _check_against_unsharded(env, min(args.steps, 64), args.num_envs, backend, mesh)
            row = {"env": env_id, "backend": backend, "devices": devices, "check": check}
            for label, m in (("mesh", mesh), ("unsharded", None)):
                row[label] = _time_rollout(
                    env, args.steps, args.num_envs, backend, m, args.repeats, args.min_time
                )
            rows.append(row)
            print(json.dumps({"progress": [env_id, backend, devices]}), file=sys.stderr)
    any_done = _time_any_done(args.steps, args.num_envs, mesh, args.repeats, args.min_time)
    return {
        "devices": devices,
        "device_kind": jax.devices()[0].device_kind,
        "visible_devices": jax.device_count(),
        "rows": rows,
        "any_done_loop": any_done,
    }


def _run_child(devices: int, argv: list[str], on_cpu: bool) -> dict:
    env = child_env()
    if on_cpu:
        flag = f"--xla_force_host_platform_device_count={devices}"
        env["XLA_FLAGS"] = " ".join([env.get("XLA_FLAGS", ""), flag]).strip()
    cmd = [sys.executable, "-m", "benchmarks.scaling.measure", *argv, "--child", str(devices)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"{devices} device(s) failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def score(results: list[dict], counts, on_cpu: bool) -> list[dict]:
    """Set each row's `speedup` and return the target rows (2 devices against 1, on a CPU).

    The baseline is the better of the first count's mesh and unsharded rates: what one device
    gives without the mesh, so a mesh path slower than mesh=None cannot inflate the ratio.
    """
    first = results[0]["rows"]
    base = {
        (r["env"], r["backend"]): max(
            r["mesh"]["env_steps_per_s"], r["unsharded"]["env_steps_per_s"]
        )
        for r in first
    }
    targets = []
    for res in results:
        for r in res["rows"]:
            r["speedup"] = r["mesh"]["env_steps_per_s"] / base[(r["env"], r["backend"])]
            if on_cpu and counts[0] == 1 and r["devices"] == 2:
                targets.append({
                    "name": f"{r['env']} {r['backend']}: 2 devices >= {CPU_TARGET}x one device",
                    "value": r["speedup"],
                    "status": "pass" if r["speedup"] >= CPU_TARGET else "fail",
                })  # fmt: skip
    return targets


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer steps and repeats")
    p.add_argument(
        "--devices", type=int_list, default=None, help="device counts (default: 1,2 on a CPU, all)"
    )
    p.add_argument("--envs", default="CartPole-v1", help="environment ids, comma-separated")
    p.add_argument("--backends", default=None, help="default: scan on a CPU, scan,fused else")
    p.add_argument("--num-envs", type=int, default=None, help="default 2^15 (CPU), 2^20 else")
    p.add_argument("--steps", type=int, default=None, help="rollout length n")
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--min-time", type=float, default=None)
    p.add_argument("--out", type=Path, default=None, help="JSON output path")
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    on_cpu = jax.default_backend() == "cpu"
    args.backends = args.backends or ("scan" if on_cpu else "scan,fused")
    args.num_envs = args.num_envs or (1 << 15 if on_cpu else 1 << 20)
    args.steps = args.steps or (100 if args.quick else 500)
    args.repeats = args.repeats or (3 if args.quick else 5)
    args.min_time = args.min_time if args.min_time is not None else (0.2 if args.quick else 1.0)
    if args.child is not None:
        print(json.dumps(child(args)))
        return 0

    counts = args.devices or ((1, 2) if on_cpu else tuple(range(1, jax.device_count() + 1)))
    if not on_cpu and max(counts) > jax.device_count():
        p.error(f"--devices {max(counts)}: this machine has {jax.device_count()} devices")
    if any(args.num_envs % d for d in counts):
        p.error(f"--num-envs {args.num_envs} must be a multiple of every device count {counts}")
    forwarded = [
        "--envs", args.envs, "--backends", args.backends, "--num-envs", str(args.num_envs),
        "--steps", str(args.steps), "--repeats", str(args.repeats),
        "--min-time", str(args.min_time),
    ]  # fmt: skip
    results = [_run_child(d, forwarded, on_cpu) for d in counts]
    targets = score(results, counts, on_cpu)
    record = {
        "benchmark": "scaling",
        "quick": args.quick,
        "provenance": provenance(),
        "note": (
            "env-steps/s of jaxsim.rollout (random policy, outputs='rewards') with the batch "
            "split over a mesh of D devices, one process per D (CPU: forced host devices), "
            "median of repeats; 'unsharded' is mesh=None in the same process; any_done_loop "
            "times n steps of a max over the split batch plus an add (the lazy reset's "
            "all-reduce); speedup is the mesh rate over the better of the first count's mesh and "
            "unsharded rates (what a user would run without the mesh)"
        ),
        "num_envs": args.num_envs,
        "steps": args.steps,
        "results": results,
        "targets": targets,
    }
    # Its table and targets: the suite's section, as RESULTS.md shows them.
    return finish(record, args.out or default_out("scaling", args.quick))


if __name__ == "__main__":
    raise SystemExit(main())
