"""Random-policy env-steps/s vs num_envs: jaxsim's scan backend beside CPU simulators and JAX peers.

Usage:
  python -m benchmarks.rollout_throughput                     # CartPole, N = 1 ... 65536
  python -m benchmarks.rollout_throughput --envs all          # all five environments
  python -m benchmarks.rollout_throughput --quick             # N <= 4096, ~1-3 min on 2 cores
  python -m benchmarks.rollout_throughput --num-envs 1,16 --repeats 3 --min-time 0.5 --out x.json

Implementations (each where it is installed and provides the environment, else recorded as
skipped with the reason): jaxsim; Gymnasium SyncVectorEnv, AsyncVectorEnv and numpy-vectorized
CartPole; EnvPool; gymnax; an eager-PyTorch CartPole (benchmarks/baselines.py); and jaxsim's
CartPole physics alone, the floor.

Every implementation runs in this one process, interleaved per batch size so that load from
elsewhere hits them alike; compare the ratios, not the absolute figures, across runs. Before any
timing, each is checked against jaxsim's `env.step` from the same states with the same actions
(EnvPool, which cannot be set to a state, statistically), and every timed call is checked for
dropped steps. Each is compiled and warmed up untimed, then timed as the median of `--repeats`
samples of at least `--min-time` seconds. The JSON record (provenance, checks, per-implementation
compile time and median/min/max throughput, target ratios at 4096 envs) is written atomically;
records of finished measurements go to a `.partial.jsonl` beside it while the run is in
progress, so an interrupted run keeps them.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import itertools
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jaxsim
from benchmarks import baselines
from benchmarks._common import (
    RESULTS_DIR,
    Timing,
    append_jsonl,
    finite_json,
    format_rate,
    format_table,
    machine_tag,
    provenance,
    time_fn,
    write_json_atomic,
)
from benchmarks.baselines import Skipped

ENV_ID = "CartPole-v1"
ENV_IDS = ("CartPole-v1", "Pendulum-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Acrobot-v1")
FULL_NUM_ENVS = (1, 16, 256, 4096, 65536)
QUICK_NUM_ENVS = (1, 16, 256, 4096)
TARGET_NUM_ENVS = 4096
# Random-policy CartPole-v1 episodes last ~22 steps on average.
EPISODE_LENGTH_RANGE = (18.0, 27.0)
BASELINE_PACKAGES = ("gymnasium", "gymnax", "envpool", "torch")


@dataclasses.dataclass(frozen=True)
class Config:
    num_envs: tuple[int, ...]
    repeats: int
    min_time: float
    steps_per_call: int  # env-steps per call (n * num_envs) for jaxsim and the physics floor
    quick: bool
    impls: tuple[str, ...]
    envs: tuple[str, ...] = (ENV_ID,)
    gymnax_scan_steps: int = 1000  # as BASELINES.md; capped so a call's records stay in memory
    gymnax_max_steps_per_call: int = 2**22
    gymnasium_steps_per_call: int = 256  # env-steps per call (>= 1 vector step)
    sync_max_envs: int = 4096  # SyncVectorEnv steps one Python env at a time: 65536 is too slow
    async_max_envs: int = 16  # one process per env: more than a few per core measures contention
    torch_steps_per_call: int = 2**16  # env-steps per call, 16 to 1024 steps
    # Intra-op threads for the PyTorch baseline (0: torch's default, one per core). One, as
    # jaxsim's scan uses about one core; torch's default collapses when other processes load
    # the cores (measured 20x slower at N=4096 on 2 busy cores).
    torch_threads: int = 1

    def scan_steps(self, num_envs: int) -> int:
        return max(32, self.steps_per_call // num_envs)


_require = baselines.require


@dataclasses.dataclass
class Measured:
    """What an implementation's bench function hands back for one batch size."""

    timing: Timing
    steps_per_call: int
    checks: dict[str, Any]
    setup_s: float | None = None
    notes: dict[str, Any] | None = None


def _check(checks: dict[str, Any], name: str, ok: bool, value: Any = None) -> None:
    if isinstance(value, tuple):
        value = list(value)
    checks[name] = {"pass": bool(ok), "value": value}
    if not ok:
        raise AssertionError(f"correctness check {name!r} failed: {value!r}")


def _obs_dim(env_id: str) -> int:
    env = jaxsim.make(env_id)
    return int(np.prod(env.observation_space(env.default_params).shape))


# ------------------------------------------------------------------------------ (a) jaxsim scan
def bench_jaxsim(env_id: str, num_envs: int, cfg: Config) -> Measured:
    env = jaxsim.make(env_id)
    n = cfg.scan_steps(num_envs)
    jitted = sys.modules["jaxsim.rollout"]._scan_rollout_jit
    seeds = itertools.count(1)

    def call():
        key = jax.random.key(next(seeds))
        # backend="scan" explicitly: "auto" would pick the fused kernel on a GPU.
        return jaxsim.rollout(env, "random", n, num_envs=num_envs, key=key, backend="scan")

    checks: dict[str, Any] = {}

    def verify(traj):
        _check(checks, "reward_shape", traj.reward.shape == (n, num_envs), traj.reward.shape)
        # Every environment starts at length 0: finished plus running lengths count every step.
        done = traj.terminated | traj.truncated
        counted = int(jnp.where(done, traj.episode_length, 0).sum())
        counted += int(traj.final_state.episode_length.sum())
        _check(checks, "steps_executed", counted == n * num_envs, counted)
        _check(checks, "obs_finite", bool(jnp.isfinite(traj.obs).all()))

    cache_before = jitted._cache_size()
    timing = time_fn(call, repeats=cfg.repeats, min_time=cfg.min_time, check=verify)
    # A new key every call must not retrace: one compile for this shape, none while timing.
    new_entries = jitted._cache_size() - cache_before
    _check(checks, "compiled_once", new_entries <= 1, new_entries)
    compiles = timing.compiles_during_timing
    _check(checks, "no_compile_while_timing", compiles == 0, compiles)
    return Measured(timing, n * num_envs, checks)


def check_jaxsim_episode_length(gym_estimate: float | None) -> dict[str, Any]:
    env = jaxsim.make(ENV_ID)
    traj = jaxsim.rollout(env, "random", 128, num_envs=256, key=jax.random.key(12345))
    stats = traj.episode_stats()
    mean = float(stats.mean_length)
    low, high = EPISODE_LENGTH_RANGE
    ok = low <= mean <= high
    if gym_estimate is not None:
        ok = ok and abs(mean - gym_estimate) <= 3.0
    return {
        "pass": ok,
        "jaxsim_mean_episode_length": round(mean, 2),
        "jaxsim_episodes": int(stats.count),
        "gymnasium_1env_mean_episode_length": gym_estimate,
        "rule": f"{low} <= jaxsim <= {high} and |jaxsim - gymnasium| <= 3",
    }


def gymnasium_episode_length(episodes: int = 300) -> float | None:
    """Mean length of random-policy episodes in one Gymnasium CartPole-v1 (None if absent)."""
    try:
        gym = _require("gymnasium")
    except Skipped:
        return None
    env = gym.make(ENV_ID)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    lengths, length = [], 0
    while len(lengths) < episodes:
        _, _, terminated, truncated, _ = env.step(int(rng.integers(2)))
        length += 1
        if terminated or truncated:
            lengths.append(length)
            length = 0
            env.reset()
    env.close()
    return round(float(np.mean(lengths)), 2)


# ------------------------------------------------------------------------------ (b, c) Gymnasium
def _check_vector_plumbing(gym, envs, env_id: str, num_envs: int, checks) -> None:
    """The first few envs of a freshly reset (seed 0) vector env step exactly as single
    `gym.make` envs reset with seeds 0, 1, ... under the same actions (no episode ends in 5)."""
    k = min(num_envs, 4)
    singles = [gym.make(env_id) for _ in range(k)]
    rng = np.random.default_rng(1)
    worst = 0.0
    for i, env in enumerate(singles):
        env.reset(seed=i)
    for _ in range(5):
        actions = baselines.random_actions(envs, rng, num_envs)
        obs, *_ = envs.step(actions)
        for i, env in enumerate(singles):
            single_obs, *_ = env.step(int(actions[i]) if actions.ndim == 1 else actions[i])
            worst = max(worst, float(np.abs(obs[i] - single_obs).max()))
    for env in singles:
        env.close()
    _check(checks, "matches_single_envs", worst == 0.0, worst)


def _bench_gymnasium_vector(
    make_envs: Callable[[], Any], env_id: str, num_envs: int, cfg: Config, plumbing: bool = True
) -> Measured:
    gym = _require("gymnasium")
    t0 = time.perf_counter()
    envs = make_envs()
    envs.reset(seed=0)
    setup_s = time.perf_counter() - t0
    steps = max(1, cfg.gymnasium_steps_per_call // num_envs)
    rng = np.random.default_rng(0)
    checks: dict[str, Any] = {}
    obs_dim = _obs_dim(env_id)

    def verify(out):
        obs, _, count = out
        _check(checks, "obs_shape", obs.shape == (num_envs, obs_dim), obs.shape)
        _check(checks, "obs_finite", bool(np.isfinite(obs).all()))
        _check(checks, "steps_executed", count == steps * num_envs, count)

    try:
        if plumbing:
            _check_vector_plumbing(gym, envs, env_id, num_envs, checks)

        def call():
            done, count = 0, 0
            for _ in range(steps):
                obs, reward, terminated, truncated, _ = envs.step(
                    baselines.random_actions(envs, rng, num_envs)
                )
                done += int(np.count_nonzero(terminated | truncated))
                count += reward.shape[0]
            return obs, done, count

        timing = time_fn(call, repeats=cfg.repeats, min_time=cfg.min_time, check=verify)
    finally:
        envs.close()
    return Measured(timing, steps * num_envs, checks, setup_s=setup_s)


def bench_gymnasium_sync(env_id: str, num_envs: int, cfg: Config) -> Measured:
    gym = _require("gymnasium")
    if num_envs > cfg.sync_max_envs:
        raise Skipped(f"num_envs > {cfg.sync_max_envs}: one Python env per instance, far too slow")
    return _bench_gymnasium_vector(
        lambda: gym.vector.SyncVectorEnv([functools.partial(gym.make, env_id)] * num_envs),
        env_id,
        num_envs,
        cfg,
    )


def bench_gymnasium_async(env_id: str, num_envs: int, cfg: Config) -> Measured:
    gym = _require("gymnasium")
    if num_envs > cfg.async_max_envs:
        raise Skipped(
            f"num_envs > {cfg.async_max_envs}: one process per env on "
            f"{os.cpu_count()} cores measures contention, not the simulator"
        )
    # forkserver: forking this process, whose XLA runtime is multithreaded, is unsafe.
    return _bench_gymnasium_vector(
        lambda: gym.vector.AsyncVectorEnv(
            [functools.partial(gym.make, env_id)] * num_envs, context="forkserver"
        ),
        env_id,
        num_envs,
        cfg,
    )


def bench_gymnasium_numpy(env_id: str, num_envs: int, cfg: Config) -> Measured:
    gym = _require("gymnasium")
    if env_id != "CartPole-v1":
        raise Skipped(f"Gymnasium has no numpy-vectorized {env_id} (CartPole-v1 only)")
    # It resets inside `step` on its own generator: no single-env plumbing to compare with.
    return _bench_gymnasium_vector(
        lambda: gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point"),
        env_id,
        num_envs,
        cfg,
        plumbing=False,
    )


# ----------------------------------------------------------------------------------- (d) EnvPool
def bench_envpool(env_id: str, num_envs: int, cfg: Config) -> Measured:
    t0 = time.perf_counter()
    envs = baselines.make_envpool(env_id, num_envs)
    envs.reset()
    setup_s = time.perf_counter() - t0
    steps = max(1, cfg.gymnasium_steps_per_call // num_envs)
    rng = np.random.default_rng(0)
    checks: dict[str, Any] = {}
    obs_dim = _obs_dim(env_id)

    def verify(out):
        obs, env_ids = out
        _check(checks, "obs_shape", obs.shape == (num_envs, obs_dim), obs.shape)
        _check(checks, "obs_finite", bool(np.isfinite(obs).all()))
        # Synchronous mode (batch_size == num_envs): every env answers every step.
        _check(checks, "all_envs_stepped", sorted(env_ids.tolist()) == list(range(num_envs)))

    def call():
        for _ in range(steps):
            obs, _, _, _, info = envs.step(baselines.random_actions(envs, rng, num_envs))
        return obs, info["env_id"]

    try:
        timing = time_fn(call, repeats=cfg.repeats, min_time=cfg.min_time, check=verify)
    finally:
        envs.close()
    notes = {"num_threads": envs.config.get("num_threads"), "threads_0_means": "hardware"}
    return Measured(timing, steps * num_envs, checks, setup_s=setup_s, notes=notes)


# ------------------------------------------------------------------------------------ (e) gymnax
def _gymnax_rollout(env, params, num_envs: int, n: int):
    """jit(scan(vmap(step))) as people run gymnax: a key per env per step, auto-reset step."""
    space = env.action_space(params)

    def sample(key):
        # One draw for the whole batch's actions (cheaper than a key per env, as a policy's
        # sampler would do); gymnax's step needs a key per environment.
        if hasattr(space, "n"):
            return jax.random.randint(key, (num_envs,), 0, space.n)
        shape = (num_envs, *space.shape)
        return jax.random.uniform(key, shape, minval=space.low, maxval=space.high)

    def run(key):
        key, k_reset = jax.random.split(key)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(k_reset, num_envs), params
        )

        def body(carry, _):
            obs, state, key = carry
            key, k_act, k_step = jax.random.split(key, 3)
            action = sample(k_act)
            next_obs, state, reward, terminated, truncated, _ = jax.vmap(
                env.step, in_axes=(0, 0, 0, None)
            )(jax.random.split(k_step, num_envs), state, action, params)
            return (next_obs, state, key), (obs, action, reward, terminated | truncated)

        _, traj = jax.lax.scan(body, (obs, state, key), None, length=n)
        return traj

    return jax.jit(run)


def bench_gymnax(env_id: str, num_envs: int, cfg: Config) -> Measured:
    gymnax = _require("gymnax")
    env, params = gymnax.make(env_id)
    n = min(cfg.gymnax_scan_steps, max(32, cfg.gymnax_max_steps_per_call // num_envs))
    run = _gymnax_rollout(env, params, num_envs, n)
    seeds = itertools.count(1)
    checks: dict[str, Any] = {}
    obs_dim = _obs_dim(env_id)

    def verify(traj):
        obs, _, reward, done = traj
        _check(checks, "obs_shape", obs.shape == (n, num_envs, obs_dim), obs.shape)
        _check(checks, "obs_finite", bool(jnp.isfinite(obs).all()))
        _check(checks, "reward_shape", reward.shape == (n, num_envs), reward.shape)
        if env_id == "CartPole-v1":
            # gymnax pays 1 per step after a reset, so the total counts the steps executed.
            total = int(reward.sum())
            _check(checks, "steps_executed", total == n * num_envs, total)
            episodes = int(done.sum())
            if episodes >= 20:
                mean = n * num_envs / episodes
                _check(checks, "mean_episode_length", 15 <= mean <= 35, round(mean, 2))

    timing = time_fn(
        lambda: run(jax.random.key(next(seeds))),
        repeats=cfg.repeats,
        min_time=cfg.min_time,
        check=verify,
    )
    compiles = timing.compiles_during_timing
    _check(checks, "no_compile_while_timing", compiles == 0, compiles)
    return Measured(timing, n * num_envs, checks)


# ------------------------------------------------------------------------- (f) eager PyTorch
def bench_torch(env_id: str, num_envs: int, cfg: Config) -> Measured:
    torch = _require("torch")
    if env_id != "CartPole-v1":
        raise Skipped(f"the eager PyTorch baseline implements CartPole-v1 only, not {env_id}")
    t0 = time.perf_counter()
    sim = baselines.TorchCartPole(num_envs, seed=0)
    steps = max(16, min(1024, cfg.torch_steps_per_call // num_envs))
    # A rollout buffer as PyTorch PPO code keeps one (cleanrl's ppo.py): every step recorded.
    buffers = {
        "obs": torch.zeros((steps, num_envs, 4)),
        "action": torch.zeros((steps, num_envs), dtype=torch.int64),
        "reward": torch.zeros((steps, num_envs)),
        "done": torch.zeros((steps, num_envs), dtype=torch.bool),
    }
    setup_s = time.perf_counter() - t0
    checks: dict[str, Any] = {}
    threads_before = torch.get_num_threads()
    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)

    def call():
        with torch.inference_mode():
            obs = sim.state
            for t in range(steps):
                action = sim.random_actions()
                buffers["obs"][t] = obs
                obs, reward, terminated, truncated, _ = sim.step(action)
                buffers["action"][t] = action
                buffers["reward"][t] = reward
                buffers["done"][t] = terminated | truncated
        return buffers

    def verify(out):
        total = int(out["reward"].sum())
        _check(checks, "steps_executed", total == steps * num_envs, total)
        _check(checks, "obs_finite", bool(torch.isfinite(out["obs"]).all()))
        episodes = int(out["done"].sum())
        # Only over a horizon much longer than an episode (~22 steps) does steps / episodes
        # estimate the episode length; shorter calls are covered by the dynamics check.
        if steps >= 256 and episodes >= 20:
            mean = steps * num_envs / episodes
            _check(checks, "mean_episode_length", 15 <= mean <= 35, round(mean, 2))

    try:
        timing = time_fn(call, repeats=cfg.repeats, min_time=cfg.min_time, check=verify)
        notes = {"torch_threads": torch.get_num_threads(), "device": "cpu", "mode": "eager"}
    finally:
        torch.set_num_threads(threads_before)
    return Measured(timing, steps * num_envs, checks, setup_s=setup_s, notes=notes)


# ------------------------------------------------------------------------------ (g) physics only
def _balance(s):
    """A fixed linear balancing law: no randomness, and the pole stays up without resets.

    An open-loop pattern (e.g. alternating pushes) lets the pole fall and spin: angles grow to
    tens or thousands of radians, where XLA:CPU's sin/cos run 2-3x slower than on the small
    angles real CartPole episodes see, so the floor would come out too low.
    """
    return (s.theta + 0.5 * s.theta_dot + 0.01 * s.x + 0.1 * s.x_dot > 0).astype(jnp.int32)


def _physics_only(env, num_envs: int, n: int):
    """jaxsim's CartPole dynamics on [num_envs] struct-of-arrays state: no RNG, no reset.

    Only the final state and a count of terminations (the cart may drift past its bound) leave
    the scan, so XLA must compute every step but records nothing.
    """

    def run(state, params):
        def body(carry, _):
            s, terminations = carry
            s, _, terminated = env.dynamics(s, _balance(s), params)
            return (s, terminations + terminated.astype(jnp.int32)), None

        zeros = jnp.zeros((num_envs,), jnp.int32)
        (state, terminations), _ = jax.lax.scan(body, (state, zeros), None, length=n)
        return state, terminations.sum()

    return jax.jit(run)


def _physics_initial_state(env, num_envs: int):
    u = jax.random.uniform(jax.random.key(0), (4, num_envs), minval=-0.05, maxval=0.05)
    return env.state_type(u[0], u[1], u[2], u[3], jnp.zeros((num_envs,), jnp.int32))


def check_physics_only() -> dict[str, Any]:
    """The floor's scan equals stepping jaxsim's `env.step` under vmap, step by step."""
    env = jaxsim.make(ENV_ID)
    params = env.default_params
    num_envs, n = 64, 200
    state0 = _physics_initial_state(env, num_envs)
    got, got_terminations = _physics_only(env, num_envs, n)(state0, params)
    step = jax.jit(jax.vmap(env.step, in_axes=(None, 0, 0, None)))
    state, terminations = state0, 0
    for _ in range(n):
        state, ts = step(jax.random.key(0), state, _balance(state), params)
        terminations += int(ts.terminated.sum())
    err = max(
        float(jnp.abs(getattr(got, f) - getattr(state, f)).max())
        for f in ("x", "x_dot", "theta", "theta_dot")
    )
    ok = err <= 1e-5 and int(got_terminations) == terminations
    return {
        "pass": ok,
        "max_abs_state_error": err,
        "terminations": int(got_terminations),
        "reference_terminations": terminations,
    }


def bench_physics_only(env_id: str, num_envs: int, cfg: Config) -> Measured:
    if env_id != "CartPole-v1":
        raise Skipped(f"the physics-only floor is measured on CartPole-v1 only, not {env_id}")
    env = jaxsim.make(env_id)
    params = env.default_params
    n = cfg.scan_steps(num_envs)
    run = _physics_only(env, num_envs, n)
    state0 = _physics_initial_state(env, num_envs)
    checks: dict[str, Any] = {}

    def verify(out):
        state, _ = out
        finite = all(bool(jnp.isfinite(getattr(state, f)).all()) for f in ("x", "x_dot", "theta"))
        _check(checks, "state_finite", finite)
        # The pole stayed up: the angles were in the range real episodes see.
        max_theta = float(jnp.abs(state.theta).max())
        _check(checks, "pole_balanced", max_theta < 0.21, max_theta)

    timing = time_fn(
        lambda: run(state0, params), repeats=cfg.repeats, min_time=cfg.min_time, check=verify
    )
    compiles = timing.compiles_during_timing
    _check(checks, "no_compile_while_timing", compiles == 0, compiles)
    return Measured(timing, n * num_envs, checks)


# ----------------------------------------------------------------------------------------- driver
IMPLS: dict[str, tuple[str, Callable[[str, int, Config], Measured]]] = {
    "jaxsim": ("jaxsim.rollout, scan backend (records the full Trajectory)", bench_jaxsim),
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

# (name, numerator, denominator or None for compile seconds, bound, "min" | "max"); CartPole.
TARGETS = (
    ("jaxsim / gymnasium_numpy", "jaxsim", "gymnasium_numpy", 3.0, "min"),
    ("jaxsim / gymnax", "jaxsim", "gymnax", 4.0, "min"),
    ("jaxsim / physics_only", "jaxsim", "physics_only", 0.5, "min"),
    ("jaxsim compile seconds", "jaxsim", None, 1.0, "max"),
)


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
    except Skipped as e:
        return {**record, "status": "skipped", "reason": str(e)}
    except Exception as e:
        traceback.print_exc()
        return {**record, "status": "failed", "reason": f"{type(e).__name__}: {e}"}
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


def _find(records, impl: str, num_envs: int, env_id: str = ENV_ID) -> dict[str, Any] | None:
    for r in records:
        if (
            r["impl"] == impl
            and r["num_envs"] == num_envs
            and r.get("env_id", ENV_ID) == env_id
            and r["status"] == "ok"
        ):
            return r
    return None


def evaluate_targets(records) -> list[dict[str, Any]]:
    out = []
    for name, num, den, bound, kind in TARGETS:
        row: dict[str, Any] = {
            "name": name,
            "env_id": ENV_ID,
            "num_envs": TARGET_NUM_ENVS,
            kind: bound,
        }
        a = _find(records, num, TARGET_NUM_ENVS)
        b = _find(records, den, TARGET_NUM_ENVS) if den else None
        if a is None or (den and b is None) or (den is None and a["compile_s"] is None):
            out.append({**row, "value": None, "pass": None, "status": "not measured"})
            continue
        if den is None:
            value, value_range = a["compile_s"], None
            # Wall-clock compile time grows with load from other processes; CPU time less so.
            row["first_call_cpu_s"] = a["first_call_cpu_s"]
        else:
            ra, rb = a["steps_per_s"], b["steps_per_s"]
            value = ra["median"] / rb["median"]
            # Worst and best pairing of the repeats: how far load noise could move the ratio.
            value_range = [ra["min"] / rb["max"], ra["max"] / rb["min"]]
        ok = value >= bound if kind == "min" else value < bound
        out.append(
            {
                **row,
                "value": value,
                "range": value_range,
                "pass": ok,
                "status": "pass" if ok else "fail",
            }
        )
    return out


def render(records, targets, cfg: Config) -> str:
    parts = []
    for env_id in cfg.envs:
        headers = ["implementation", "compile s", *(f"N={n}" for n in cfg.num_envs)]
        rows = []
        for impl in cfg.impls:
            cells, compile_s = [], []
            for n in cfg.num_envs:
                r = next(
                    r
                    for r in records
                    if r["impl"] == impl and r["num_envs"] == n and r["env_id"] == env_id
                )
                if r["status"] == "ok":
                    cells.append(format_rate(r["steps_per_s"]["median"]))
                    if r["compile_s"] is not None:
                        compile_s.append(r["compile_s"])
                else:
                    cells.append(r["status"])
            if all(c == "skipped" for c in cells):
                continue
            rows.append([impl, f"{max(compile_s):.2f}" if compile_s else "–", *cells])
        parts.append(
            f"{env_id}, random policy: env-steps/s, median of {cfg.repeats} (compile: "
            f"jax trace+lower+compile, max over N)\n{format_table(headers, rows)}"
        )
    target_rows = []
    for t in targets:
        bound = f"{'>=' if 'min' in t else '<'} {t.get('min', t.get('max'))}"
        value = "–" if t["value"] is None else f"{t['value']:.2f}"
        if t.get("range"):
            value += f" ({t['range'][0]:.2f}-{t['range'][1]:.2f})"
        if t.get("first_call_cpu_s") is not None:
            value += f" (1st call CPU {t['first_call_cpu_s']:.2f})"
        target_rows.append([f"{t['name']} @ {t['num_envs']}", value, bound, t["status"]])
    parts.append(
        format_table(["target (CartPole-v1)", "value (range)", "required", "result"], target_rows)
    )
    return "\n\n".join(parts)


def _parse_num_envs(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"num_envs must be integers >= 1, got {text!r}")
    return values


def _parse_names(valid: tuple[str, ...] | list[str], what: str):
    def parse(text: str) -> tuple[str, ...]:
        if text.strip() == "all":
            return tuple(valid)
        values = tuple(dict.fromkeys(v.strip() for v in text.split(",") if v.strip()))
        unknown = sorted(set(values) - set(valid))
        if unknown or not values:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {unknown}; choose from {list(valid)} or 'all'"
            )
        return values

    return parse


_parse_impls = _parse_names(list(IMPLS), "implementation(s)")


def parse_args(argv=None) -> tuple[Config, Path]:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.rollout_throughput",
        description=__doc__.splitlines()[0],
    )
    p.add_argument(
        "--quick", action="store_true", help=f"N in {QUICK_NUM_ENVS}, shorter samples (same method)"
    )
    p.add_argument(
        "--envs",
        type=_parse_names(ENV_IDS, "environment(s)"),
        default=(ENV_ID,),
        help=f"comma-separated subset of {list(ENV_IDS)}, or 'all' (default {ENV_ID})",
    )
    p.add_argument(
        "--num-envs",
        type=_parse_num_envs,
        default=None,
        help=f"comma-separated batch sizes (default {FULL_NUM_ENVS})",
    )
    p.add_argument("--repeats", type=int, default=3, help="timed samples per measurement")
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
        type=_parse_impls,
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
    if args.repeats < 1:
        p.error("--repeats must be >= 1")
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
    out = args.out or RESULTS_DIR / (
        f"rollout_throughput_{machine_tag()}{'_quick' if args.quick else ''}.json"
    )
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
        "targets": targets,
        "results": records,
    }
    write_json_atomic(out, finite_json(result))
    partial.unlink(missing_ok=True)
    print()
    print(render(records, targets, cfg))
    print(f"\nwrote {out} ({result['wall_s']} s)")
    failed = [r for r in records if r["status"] == "failed"]
    # A peer whose dynamics differ from jaxsim's is flagged in the record; ours must pass.
    failed_checks = [
        name
        for name, c in checks.items()
        if not c["pass"] and not any(name.endswith(f"/{p}_dynamics") for p in PEER_CHECKS)
    ]
    if failed or failed_checks:
        print(
            f"FAILED: {[(r['impl'], r['env_id'], r['num_envs']) for r in failed]} {failed_checks}"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
