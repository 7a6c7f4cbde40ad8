"""Checks of rollouts and agents on a device mesh, run in a subprocess with forced CPU devices.

`python tests/jaxsim/mesh_worker.py CASE[,CASE...] [OUT]` with
XLA_FLAGS=--xla_force_host_platform_device_count=N set by the caller (test_sharding.py, beside
it), so the flag never reaches the test process. Prints one JSON line: each case's measurements
(or its traceback); the tests assert on them.
"""

from __future__ import annotations

import json
import sys
import traceback

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

import jaxsim

EXACT = ("action", "terminated", "truncated", "episode_length")  # ints and flags
FLOATS = ("obs", "reward", "next_obs", "episode_return")


def max_gap(a, b) -> float:
    """The largest |a - b| over two pytrees of the same structure (numpy on this host)."""
    pairs = zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    return max(float(np.abs(np.asarray(x, float) - np.asarray(y, float)).max()) for x, y in pairs)


def compare(a: jaxsim.Trajectory, b: jaxsim.Trajectory) -> dict:
    """How trajectory `b` (on a mesh) differs from `a`: exact fields equal, float gaps."""
    out = {"exact_equal": {}, "float_gap": {}}
    for name in EXACT:
        out["exact_equal"][name] = bool(np.array_equal(getattr(a, name), getattr(b, name)))
    leaves = {name: (getattr(a, name), getattr(b, name)) for name in FLOATS}
    leaves |= {f"extras.{k}": (a.extras[k], b.extras[k]) for k in a.extras}
    for name, (x, y) in leaves.items():
        out["float_gap"][name] = float(np.abs(np.asarray(x) - np.asarray(y)).max())
    out["per_step_split"] = all(
        x.sharding.spec == P(None, jaxsim.ENV_AXIS) for x in jax.tree.leaves(b.obs)
    )
    out["final_state_split"] = all(
        x.sharding.spec == P(jaxsim.ENV_AXIS) for x in jax.tree.leaves(b.final_state)
    )
    sa, sb = a.episode_stats(), b.episode_stats()
    out["stats_count_equal"] = int(sa.count) == int(sb.count)
    out["stats_gap"] = max_gap(sa, sb)
    return out


def rollout_case(backend: str) -> dict:
    env = jaxsim.make("CartPole-v1")
    mesh = jax.make_mesh((2,), (jaxsim.ENV_AXIS,))  # Explicit axes on jax 0.10: accepted
    policy = jaxsim.init_mlp_policy(jax.random.key(1), env)
    n, num_envs = (60, 8) if backend == "scan" else (12, 8)
    kw = dict(num_envs=num_envs, key=jax.random.key(3), backend=backend)
    # Per-environment params travel split like the batch (the other fields stay shared); a
    # per-environment masspole also leaves no shared divisor for XLA to rewrite (README).
    masspole = jnp.linspace(0.05, 0.5, num_envs)
    params = env.default_params.replace(masspole=masspole)
    a = jaxsim.rollout(env, policy, n, params=params, **kw)
    b = jaxsim.rollout(env, policy, n, params=params, mesh=mesh, **kw)
    result = {"first": compare(a, b)}
    # Continue both from their final states: the mesh one stays on the mesh.
    c = jaxsim.rollout(env, policy, 8, params=params, state=a.final_state, **kw)
    d = jaxsim.rollout(env, policy, 8, params=params, state=b.final_state, mesh=mesh, **kw)
    result["continued"] = compare(c, d)
    # Statistics kept without the per-step fields, in checked mode.
    s = jaxsim.rollout(env, "random", n, outputs="stats", checks=True, mesh=mesh, **kw).stats
    r = jaxsim.rollout(env, "random", n, outputs="stats", **kw).stats
    result["stats_only_count_equal"] = int(s.count) == int(r.count)
    result["stats_only_gap"] = max_gap(s, r)
    return result


def two_axes_case() -> dict:
    """A mesh with another axis: the batch splits over "envs" and is copied over "model"."""
    env = jaxsim.make("Pendulum-v1")
    mesh = jax.make_mesh((2, 2), ("model", jaxsim.ENV_AXIS))
    kw = dict(num_envs=6, key=jax.random.key(0))
    a = jaxsim.rollout(env, "random", 30, **kw)
    b = jaxsim.rollout(env, "random", 30, mesh=mesh, **kw)
    return compare(a, b)


def checks_case() -> str:
    """A NaN value in global environment 5 (of 8, on 2 devices) is reported as environment 5."""
    env = jaxsim.make("CartPole-v1")
    mesh = jax.make_mesh((2,), (jaxsim.ENV_AXIS,))

    def policy(key, obs):
        index = jnp.arange(obs.shape[0])
        value = jnp.where(index == 5, jnp.nan, 0.0)
        return jnp.zeros(obs.shape[0], jnp.int32), {"value": value}

    try:
        jaxsim.rollout(env, policy, 4, num_envs=8, checks=True, mesh=mesh)
    except FloatingPointError as e:
        return str(e)
    return "no error"


def ppo_case() -> dict:
    """PPO on 2 devices against 1: per-update losses and final weights."""
    from agents.ppo import PPO, PPOConfig

    env = jaxsim.make("CartPole-v1")
    config = PPOConfig(
        total_steps=8 * 16 * 4,
        num_envs=8,
        num_steps=16,
        update_epochs=2,
        num_minibatches=2,
        hidden=(16, 16),
        rollout_backend="scan",
    )
    mesh = jax.make_mesh((2,), (jaxsim.ENV_AXIS,))
    runs = []
    for m in (None, mesh):
        agent = PPO(config, env, mesh=m)
        runner, metrics = agent.jit_run(config.num_updates, vmapped=False)(
            jax.jit(agent.init)(jax.random.key(0))
        )
        runs.append((runner, metrics))
    (r1, m1), (r2, m2) = runs
    loss = np.abs(np.asarray(m1.loss.total) - np.asarray(m2.loss.total))
    from agents.dqn import DQN, DQNConfig

    dqn = DQNConfig(
        total_steps=8 * 8 * 3, num_envs=8, num_steps=8, buffer_size=256, learning_starts=64,
        batch_size=16, gradient_steps=4, hidden=(16, 16),
    )  # fmt: skip
    ends = []
    for m in (None, mesh):
        agent = DQN(dqn, env, mesh=m)
        runner = jax.jit(agent.init)(jax.random.key(0))
        ends.append(agent.jit_run(dqn.num_updates, vmapped=False)(runner)[0])
    return {
        "dqn_weight_gap": max_gap(ends[0].params, ends[1].params),
        "dqn_buffer_actions_equal": bool(
            np.array_equal(ends[0].buffer.data.action, ends[1].buffer.data.action)
        ),
        "num_updates": config.num_updates,
        "weight_gap": max_gap(r1.params, r2.params),
        "loss_gap_per_update": loss.tolist(),
        "episodes_equal": bool(np.array_equal(m1.episodes, m2.episodes)),
        "env_state_split": r2.env_state.obs.sharding.spec == P(jaxsim.ENV_AXIS),
    }


def train_case(out: str) -> dict:
    from agents.train import main

    argv = ["ppo", "--devices", "2", "--num-envs", "4", "--num-steps", "8", "--total-steps"]
    argv += ["64", "--eval-envs", "4", "--no-plot", "--quiet", "--out", out]
    summary = main(argv)
    return {"mean_return": summary["eval"]["mean_return"]}


def minatar_case() -> dict:
    """MinAtar's bool grid on a mesh, scan backend: split like the batch, equal to one device's."""
    env = jaxsim.make("MinAtar/Breakout-v1", max_episode_steps=20)
    mesh = jax.make_mesh((2,), (jaxsim.ENV_AXIS,))
    kw = dict(num_envs=8, key=jax.random.key(2))
    a = jaxsim.rollout(env, "random", 30, **kw)
    b = jaxsim.rollout(env, "random", 30, mesh=mesh, **kw)
    pairs = zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    return {
        "dtypes": sorted({str(b.obs.dtype), str(b.next_obs.dtype), str(b.final_state.obs.dtype)}),
        "equal": all(np.array_equal(x, y) for x, y in pairs),
        "split": b.obs.sharding.spec == P(None, jaxsim.ENV_AXIS),
    }


def run_cases(names: list[str], out: str | None) -> dict:
    """Each case's result, or the traceback it raised: one case failing fails only its test."""
    cases = {
        "scan": lambda: rollout_case("scan"),
        "fused": lambda: rollout_case("fused"),
        "two_axes": two_axes_case,
        "minatar": minatar_case,
        "checks": checks_case,
        "ppo": ppo_case,
        "train": lambda: train_case(out),
    }
    results = {}
    for name in names:
        try:
            results[name] = {"result": cases[name]()}
        except Exception:
            results[name] = {"error": traceback.format_exc()}
    return results


if __name__ == "__main__":
    # CASE[,CASE...] [OUT]: the cases run in this one process (one start of jax for them all).
    results = run_cases(sys.argv[1].split(","), sys.argv[2] if len(sys.argv) > 2 else None)
    print(json.dumps({"devices": jax.device_count(), "cases": results}))
