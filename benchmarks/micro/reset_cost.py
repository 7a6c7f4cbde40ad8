"""Auto-reset costs what it needs: a rollout with lazy resets against one that resets every step.

Usage:
  python -m benchmarks.micro.reset_cost          # classic five at 4096 envs + a heavy-reset sweep
  python -m benchmarks.micro.reset_cost --quick  # fewer steps and repeats (~1 min on 2 cores)
  python -m benchmarks.micro.reset_cost --out x.json

`jaxsim.rollout.step.batch_step` computes the reset draws and `init_state` under a batch-level
`lax.cond`, only on steps where some environment is done. The "eager" column is the same
rollout under `jax.vmap` over a leading axis of one, where that cond becomes a select and the
reset is computed on every step: same code, same compiler, one difference. Both are checked to
give identical trajectories before timing.

Two workloads:
- the five classic-control environments, random policy, 4096 environments, rewards kept;
- `HeavyReset`, a toy whose reset costs ~100x its step (a chain of transcendental functions,
  as a physics engine's reset costs a solve), with every environment's episode lasting exactly
  L steps, so a reset happens on 1 step in L; and the same with episode lengths spread per
  environment, so that some environment of the batch resets on almost every step, where a
  batch-level cond cannot help.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

import jaxsim
from benchmarks.harness.formatting import format_rate, format_table
from benchmarks.harness.provenance import provenance
from benchmarks.harness.record import default_out, finish
from benchmarks.harness.timing import time_fn
from jaxsim.params import field

CLASSIC = ("CartPole-v1", "Pendulum-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Acrobot-v1")


@struct.dataclass
class HeavyResetParams:
    rounds: int = field(128, ge=1, doc="iterations of the reset's transcendental chain")
    max_episode_steps: int = field(16, ge=1)


@struct.dataclass
class HeavyResetState:
    x: jax.Array
    time: jax.Array


class HeavyReset(jaxsim.Env):
    """A cheap step (x += small push) behind an expensive reset (a chain of `rounds` sin/cos)."""

    id = "HeavyReset-v0"
    params_type = HeavyResetParams
    state_type = HeavyResetState
    draws = jaxsim.Draws(reset=1)

    def init_state(self, u, params):
        x = jax.lax.fori_loop(0, params.rounds, lambda _, x: jnp.sin(1.3 * x + jnp.cos(x)), u[0])
        return HeavyResetState(x, jnp.zeros(jnp.shape(u[0]), jnp.int32))

    def dynamics(self, state, action, params):
        x = state.x + 0.01 * (action.astype(jnp.float32) - 0.5)
        return state.replace(x=x), x, jnp.zeros_like(x, jnp.bool_)

    def obs_fields(self, state, params):
        return (state.x,)

    def observation_space(self, params):
        return jaxsim.Box(-np.inf, np.inf, (1,))

    def action_space(self, params):
        return jaxsim.Discrete(2)


def _runners(env, params, n, num_envs):
    """(lazy, eager) rollouts of a fresh key per call.

    The eager one is vmapped over a leading axis of one on the key and the params: with
    `max_episode_steps` batched, `done` and so the cond's predicate are batched, and vmap turns
    the cond into a select that computes the reset on every step.
    """
    counter = iter(range(1, 1 << 30))

    def rollout(key, params):
        return jaxsim.rollout(
            env, "random", n, num_envs=num_envs, key=key, params=params, outputs="rewards",
            backend="scan",
        )  # fmt: skip

    lazy_fn = jax.jit(rollout)
    eager_fn = jax.jit(jax.vmap(rollout))
    params_1 = jax.tree.map(lambda x: jnp.asarray(x)[None], params)

    def lazy(key=None):
        return lazy_fn(jax.random.key(next(counter)) if key is None else key, params)

    def eager(key=None):
        key = jax.random.key(next(counter)) if key is None else key
        return jax.tree.map(lambda x: x[0], eager_fn(key[None], params_1))

    return lazy, eager


def measure(name, env, params, n, num_envs, repeats, min_time) -> dict:
    lazy, eager = _runners(env, params, n, num_envs)
    a, b = lazy(jax.random.key(0)), eager(jax.random.key(0))
    # The two compile to different fusions, so floats may differ in the last bits.
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        x, y = np.asarray(x), np.asarray(y)
        if np.issubdtype(x.dtype, np.floating):
            np.testing.assert_allclose(y, x, rtol=1e-3, atol=1e-4, err_msg=name)
        else:
            np.testing.assert_array_equal(y, x, err_msg=name)
    done = np.asarray(a.done)
    reset_steps = float(done[:-1].any(axis=1).mean())  # steps whose auto-reset ran

    def check(out):
        if out.reward.shape != (n, num_envs) or not np.isfinite(np.asarray(out.reward)).all():
            raise AssertionError(f"{name}: bad rewards {out.reward.shape}")

    row = {"name": name, "num_envs": num_envs, "n": n, "reset_step_share": reset_steps}
    for label, fn in (("lazy", lazy), ("eager", eager)):
        timing = time_fn(fn, repeats=repeats, min_time=min_time, check=check)
        row[label] = timing.to_dict() | {"env_steps_per_s": n * num_envs / timing.median_s}
    row["lazy_over_eager"] = row["lazy"]["env_steps_per_s"] / row["eager"]["env_steps_per_s"]
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer steps and repeats")
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = p.parse_args(argv)
    n = 200 if args.quick else 1000
    repeats = 3 if args.quick else args.repeats
    min_time = 0.2 if args.quick else 1.0
    rows = []
    for env_id in CLASSIC:
        env = jaxsim.make(env_id)
        rows.append(measure(env_id, env, env.default_params, n, args.num_envs, repeats, min_time))
        print(rows[-1]["name"], f"{rows[-1]['lazy_over_eager']:.2f}x", flush=True)
    heavy = HeavyReset()
    heavy_envs = max(args.num_envs // 4, 1)
    for length in (1, 4, 16, 64):
        params = heavy.default_params.replace(max_episode_steps=length)
        name = f"HeavyReset, every episode {length} steps"
        rows.append(measure(name, heavy, params, n, heavy_envs, repeats, min_time))
        print(rows[-1]["name"], f"{rows[-1]['lazy_over_eager']:.2f}x", flush=True)
    spread = heavy.default_params.replace(
        max_episode_steps=jnp.arange(heavy_envs, dtype=jnp.int32) % 61 + 4
    )
    name = "HeavyReset, episodes of 4-64 steps, spread"
    rows.append(measure(name, heavy, spread, n, heavy_envs, repeats, min_time))

    table = format_table(
        ["workload", "N", "steps with a reset", "lazy", "eager", "lazy / eager"],
        [
            [
                r["name"],
                r["num_envs"],
                f"{100 * r['reset_step_share']:.0f}%",
                format_rate(r["lazy"]["env_steps_per_s"]),
                format_rate(r["eager"]["env_steps_per_s"]),
                f"{r['lazy_over_eager']:.2f}x",
            ]
            for r in rows
        ],
    )
    record = {
        "benchmark": "reset_cost",
        "quick": args.quick,
        "provenance": provenance(),
        "note": (
            "env-steps/s of jaxsim.rollout (scan backend, random policy, outputs='rewards'), "
            "median of repeats; eager = the same rollout vmapped over a leading axis of one, "
            "where the reset's lax.cond becomes a select"
        ),
        "rows": rows,
    }
    return finish(record, args.out or default_out("reset_cost", args.quick), table)


if __name__ == "__main__":
    sys.exit(main())
