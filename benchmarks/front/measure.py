"""Host-stepped fronts: jaxsim's Gymnasium and SB3 fronts against the original `minatar` package
for MinAtar, one and eight environments (issue 40); against Gymnasium's own CartPole and
Pendulum, one env through `gymnasium.make` (issue 26) and CartPole's vector env at N = 16, 256,
4096 against Gymnasium's numpy-vectorized `CartPoleVectorEnv`.

Usage:
  python -m benchmarks.front.measure                      # every game and front; 7 repeats
  python -m benchmarks.front.measure --quick              # 3 repeats, fewer steps
  python -m benchmarks.front.measure --games Breakout --dispatch sync --out x.json
  python -m benchmarks.front.measure --games CartPole,Pendulum --fronts make  # single envs
  python -m benchmarks.front.measure --games CartPole --num-envs 4096 \\
      --dispatch default,sync,sync-1core,sync-1thread      # the vector front's dispatch study

Per game and front, each side steps the same pre-drawn uniform random actions (Gymnasium's
action space, seeded) the way a host-side training loop does:
- make: one environment, `gymnasium.make("jaxsim/MinAtar-<Game>-v0")` against the original's
  `gymnasium.make("MinAtar/<Game>-v0")` (both the full six-action set); `jaxsim/CartPole-v1`
  against `CartPole-v1`, `jaxsim/Pendulum-v1` against `Pendulum-v1` (Gymnasium's default
  wrappers on both); `reset()` when an episode ends (part of a step's cost, on both sides);
- make_vec: `gymnasium.make_vec(..., vectorization_mode="vector_entry_point")`
  (`JaxsimVectorEnv`, one jitted call a step) against the original's
  `gymnasium.make_vec(..., vectorization_mode="sync")` (SyncVectorEnv) for MinAtar (N = 1, 8)
  and Gymnasium's own vector entry point (`CartPoleVectorEnv`, numpy) for CartPole (N = 16,
  256, 4096), NEXT_STEP autoreset; CartPole's front is first checked to step as jaxsim's own
  `env.step` from the states its observations show (`check_front_transitions`);
- same_step: N = 1 and 8, the same vector envs in SAME_STEP mode: the path
  `jaxsim.gymnasium.make_sb3_vec_env`'s VecEnv steps (it wraps a SAME_STEP `JaxsimVectorEnv`);
- sb3: N = 1 and 8, `make_sb3_vec_env` against SB3's `DummyVecEnv` of the original, when
  Stable-Baselines3 is installed; else recorded as skipped with the reason (the jaxsim VecEnv
  subclasses SB3's and cannot be built without it; `same_step` measures what it steps).
Targets: jaxsim / original env-steps/s at least 1 (MinAtar, and CartPole's vector env);
jaxsim's single-env step time at most 2x Gymnasium's (CartPole, Pendulum).

Timing: the first reset and step of each jaxsim front (its compile) are timed apart, then one
untimed sample per side; per repeat each side runs the same number of env-steps in turn, the
order alternating, so load from other processes falls on both alike. Figures are medians over
repeats of env-steps/s, and the ratio is the median of the per-repeat paired ratios. Before
timing, the fronts' outputs are checked: observations of the original's shape and dtype (bool
[N, 10, 10, C] for MinAtar) inside the space, finite rewards, bool flags.

CPU dispatch: JAX's CPU client runs computations asynchronously unless
`jax_cpu_enable_async_dispatch` is off, a process-wide flag read once, when the CPU backend
starts. Each dispatch configuration therefore runs in its own child process: "default" as
importing `jaxsim.gymnasium` leaves JAX (asynchronous), "sync" with the front's opt-in
`jaxsim.gymnasium.cpu_dispatch(sync=True)`, "sync-1core" that with the process pinned to one
core, "sync-1thread" that on every core with XLA's CPU pool of one thread (the opt-in
`jaxsim.cpu_threads.set_cpu_threads(1)`): no hand-offs to other threads within a step. Both
sides run in every child, so each ratio compares like with like.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.arguments import int_list, name_list
from benchmarks.harness.formatting import format_rate, format_table
from benchmarks.harness.paths import REPO_ROOT, child_env

# game -> front -> the batch sizes measured
MINATAR = {"make": (1,), "make_vec": (1, 8), "same_step": (1, 8), "sb3": (1, 8)}
GAMES = {
    "Breakout": MINATAR,
    "SpaceInvaders": MINATAR,
    "CartPole": {"make": (1,), "make_vec": (16, 256, 4096)},
    "Pendulum": {"make": (1,)},
}
FRONTS = tuple(MINATAR)
GYMNASIUM_IDS = {"CartPole": "CartPole-v1", "Pendulum": "Pendulum-v1"}  # against Gymnasium's own
DISPATCH = ("default", "sync", "sync-1core", "sync-1thread")
DEFAULT_DISPATCH = ("default", "sync", "sync-1thread")
TARGET = 1.0  # jaxsim env-steps/s / the original's, at least
STEP_TIME_TARGET = 2.0  # jaxsim's single-env step time / Gymnasium's, at most
MIN_CALLS = 16  # calls per side and sample, at least (a vector env of 4096 takes a few ms)


def ids(game: str) -> tuple[str, str]:
    """(jaxsim's id, the original's id) of `game`."""
    if game in GYMNASIUM_IDS:
        return f"jaxsim/{GYMNASIUM_IDS[game]}", GYMNASIUM_IDS[game]
    return f"jaxsim/MinAtar-{game}-v0", f"MinAtar/{game}-v0"


# ------------------------------------------------------------------------------------ the sides
def _builders(game: str, front: str, n: int):
    """(jaxsim env, original env) builders of one case, or a str: why it cannot run."""
    import gymnasium as gym

    import jaxsim.gymnasium

    ours, theirs = ids(game)
    if front == "make":
        return lambda: gym.make(ours), lambda: gym.make(theirs)
    if front in ("make_vec", "same_step"):
        mode = gym.vector.AutoresetMode.SAME_STEP if front == "same_step" else None
        kw = {} if mode is None else {"autoreset_mode": mode}
        if game in GYMNASIUM_IDS:  # Gymnasium's own vector env (numpy), not a SyncVectorEnv
            return (
                lambda: gym.make_vec(ours, n, vectorization_mode="vector_entry_point"),
                lambda: gym.make_vec(theirs, n, vectorization_mode="vector_entry_point"),
            )
        return (
            lambda: gym.make_vec(ours, n, vectorization_mode="vector_entry_point", **kw),
            lambda: gym.make_vec(theirs, n, vectorization_mode="sync", vector_kwargs=kw),
        )
    try:
        from stable_baselines3.common.vec_env import DummyVecEnv
    except ImportError as e:
        return (
            f"stable_baselines3 is not installed ({e}); jaxsim's SB3 VecEnv subclasses SB3's "
            "VecEnv and cannot be built without it: the same_step rows measure the "
            "JaxsimVectorEnv it steps"
        )
    return (
        lambda: jaxsim.gymnasium.make_sb3_vec_env(ours, n),
        lambda: DummyVecEnv([lambda: gym.make(theirs) for _ in range(n)]),
    )


class _Side:
    """One env of a case, stepped `steps` env-steps at a time with pre-drawn actions."""

    def __init__(self, name: str, env, front: str, n: int, actions: np.ndarray):
        self.name, self.env, self.front, self.n = name, env, front, n
        self.actions = actions  # [calls, n] (make: [calls])
        self.episodes = 0
        self.last = None
        if front == "sb3":
            env.seed(0)
            self.last = env.reset()
        else:
            self.last = env.reset(seed=0)[0]

    def run(self) -> float:
        """Seconds per env-step over the pre-drawn actions."""
        env, ended = self.env, 0
        t0 = time.perf_counter()
        if self.front == "make":
            for a in self.actions:
                out = env.step(a)
                if out[2] or out[3]:
                    env.reset()
                    ended += 1
        elif self.front == "sb3":
            for a in self.actions:
                out = env.step(a)
                ended += int(out[2].sum())
        else:
            for a in self.actions:
                out = env.step(a)
                ended += int(out[2].sum() + out[3].sum())
        seconds = (time.perf_counter() - t0) / (len(self.actions) * self.n)
        self.last = out
        self.episodes += ended
        return seconds


def check_outputs(side: _Side, space) -> dict[str, Any]:
    """The last step's outputs: observations of the space's shape and dtype inside it, finite
    rewards, bool flags; raises AssertionError naming what was wrong."""
    out = side.last
    obs, reward = out[0], np.asarray(out[1])
    if side.front == "make":
        batch = np.asarray(obs)[None]
    else:
        batch = np.asarray(obs)
    expected = (side.n, *space.shape)
    if batch.shape != expected or batch.dtype != space.dtype:
        raise AssertionError(
            f"{side.name}: observations {batch.dtype}{list(batch.shape)}, expected "
            f"{space.dtype}{list(expected)}"
        )
    if not all(space.contains(o) for o in batch):
        raise AssertionError(f"{side.name}: an observation lies outside {space}")
    if not np.all(np.isfinite(reward)):
        raise AssertionError(f"{side.name}: rewards {reward!r} are not finite")
    flags = [np.asarray(x) for x in out[2:4]] if side.front != "sb3" else [np.asarray(out[2])]
    if side.front != "make" and any(f.dtype != np.bool_ or f.shape != (side.n,) for f in flags):
        raise AssertionError(f"{side.name}: flags {[f'{f.dtype}{f.shape}' for f in flags]}")
    return {"obs": f"{batch.dtype}{list(batch.shape[1:])}", "in_space": True, "finite": True}


def measure_case(game: str, front: str, n: int, steps: int, repeats: int) -> dict[str, Any]:
    """Both sides of one case; env-steps/s per repeat, their paired ratios, the checks."""
    point = {"game": game, "front": front, "num_envs": n}
    built = _builders(game, front, n)
    if isinstance(built, str):
        return {**point, "status": "skipped", "reason": built}
    make_ours, make_theirs = built
    t0 = time.perf_counter()
    ours = make_ours()
    space = _single_space(ours)
    actions = draw_actions(ours, front, max(MIN_CALLS, steps // n), n)
    sides = {"jaxsim": _Side("jaxsim", ours, front, n, actions[:1])}
    sides["jaxsim"].run()  # the first step: compile
    compile_s = time.perf_counter() - t0
    transitions = None
    if game == "CartPole" and front == "make_vec":  # its compile timed first
        transitions = check_front_transitions(min(n, 256))
    sides["jaxsim"].actions = actions
    sides["original"] = _Side("original", make_theirs(), front, n, actions)
    if _single_space(sides["original"].env) != space:
        raise AssertionError(f"{game} {front}: observation spaces differ")
    for side in sides.values():
        side.run()  # untimed: first calls, Gymnasium's one-off checks
    checks = {name: check_outputs(side, space) for name, side in sides.items()}
    if transitions is not None:
        checks["transitions"] = transitions
    per_step: dict[str, list[float]] = {name: [] for name in sides}
    ratios = []
    for r in range(repeats):
        for name in ("jaxsim", "original") if r % 2 == 0 else ("original", "jaxsim"):
            per_step[name].append(sides[name].run())
        ratios.append(per_step["original"][-1] / per_step["jaxsim"][-1])
    for name, side in sides.items():
        checks[name] = {**checks[name], **check_outputs(side, space)}
        side.env.close()
    rates = {name: [1.0 / s for s in v] for name, v in per_step.items()}
    ratio = statistics.median(ratios)
    print(
        f"{game} {front} N={n}: jaxsim {format_rate(statistics.median(rates['jaxsim']))}, "
        f"original {format_rate(statistics.median(rates['original']))}: {ratio:.2f}x",
        flush=True,
    )
    return {
        **point,
        "status": "ok",
        "steps_per_sample": len(actions) * n,
        "compile_s": compile_s,
        "episodes_ended": {name: side.episodes for name, side in sides.items()},
        "steps_per_s": {
            name: {
                "median": statistics.median(v),
                "min": min(v),
                "max": max(v),
                "samples": v,
            }
            for name, v in rates.items()
        },
        "step_us": {name: 1e6 * statistics.median(v) for name, v in per_step.items()},
        "ratio_samples": ratios,
        "jaxsim_over_original": ratio,
        "checks": checks,
    }


def _single_space(env):
    """One environment's observation space, whichever API the env has."""
    space = getattr(env, "single_observation_space", None)
    return space if space is not None else env.observation_space


def draw_actions(env, front: str, calls: int, n: int):
    """Uniform random actions of `env`'s action space, [calls, n, ...] ("make": [calls, ...])."""
    space = getattr(env, "single_action_space", None) or env.action_space
    rng = np.random.default_rng(0)
    shape = (calls,) if front == "make" else (calls, n)
    if hasattr(space, "n"):
        actions = rng.integers(0, int(space.n), shape)
        # "make": ints, as a policy's argmax().item() hands them over
        return [int(a) for a in actions] if front == "make" else actions
    return rng.uniform(space.low, space.high, (*shape, *space.shape)).astype(space.dtype)


def check_front_transitions(num_envs: int, steps: int = 40) -> dict[str, Any]:
    """CartPole's vector front steps equal `jax.vmap(env.step)` from the states its observations
    show (CartPole's observation is its state: x, x_dot, theta, theta_dot). Lanes that show a
    deferred reset (NEXT_STEP) are checked to show reward 0 and no flags instead."""
    import gymnasium as gym
    import jax
    import jax.numpy as jnp

    import jaxsim
    import jaxsim.gymnasium  # registers jaxsim/<id>

    env = jaxsim.make("CartPole-v1")
    step = jax.jit(jax.vmap(env.step, in_axes=(None, 0, 0, None)))
    venv = gym.make_vec("jaxsim/CartPole-v1", num_envs, vectorization_mode="vector_entry_point")
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


# ------------------------------------------------------------------------------------ processes
def run_child(dispatch: str, args) -> dict[str, Any]:
    """This process's cases, each side of each stepped in turn."""
    if dispatch == "sync-1core":  # before JAX starts its thread pools
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    if dispatch == "sync-1thread":  # the opt-in XLA pool of one thread, before JAX starts
        from jaxsim.gymnasium import set_cpu_threads

        set_cpu_threads(1)
    import jax

    import jaxsim.gymnasium

    if dispatch != "default":
        jaxsim.gymnasium.cpu_dispatch(sync=True)  # the opt-in, before JAX's first computation
    import gymnasium as gym

    try:
        if any(g not in GYMNASIUM_IDS for g in args.games):
            import minatar.gym

            if "MinAtar/Breakout-v0" not in gym.registry:  # registered by its entry point
                minatar.gym.register_envs()
    except ImportError as e:
        why = f"the original `minatar` package is needed: pip install minatar ({e})"
        raise SystemExit(why) from e
    points = [
        measure_case(game, front, n, args.steps, args.repeats)
        for game in args.games
        for front, sizes in GAMES[game].items()
        if front in args.fronts
        for n in sizes
        if args.num_envs is None or n in args.num_envs
    ]
    return {
        "dispatch": dispatch,
        "cores": sorted(os.sched_getaffinity(0)),
        "xla_cpu_threads_env": os.environ.get("NPROC"),
        "async_dispatch": bool(jax.config.read("jax_cpu_enable_async_dispatch")),
        "front_dispatch": jaxsim.gymnasium.cpu_dispatch(),
        "points": points,
    }


def _spawn(dispatch: str, args) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"{dispatch}.json"
        command = [
            sys.executable, "-m", "benchmarks.front.measure", "--child-out", str(out),
            "--dispatch", dispatch, "--games", ",".join(args.games),
            "--fronts", ",".join(args.fronts), "--steps", str(args.steps),
            "--repeats", str(args.repeats),
            *(["--num-envs", ",".join(map(str, args.num_envs))] if args.num_envs else []),
        ]  # fmt: skip
        subprocess.run(command, cwd=REPO_ROOT, env=child_env(), check=True)
        result = json.loads(out.read_text())
    if result["async_dispatch"] != (dispatch == "default"):
        raise AssertionError(
            f"{dispatch}: the child ran with async_dispatch={result['async_dispatch']}"
        )
    return result


def targets_of(configurations: dict[str, Any]) -> list[dict[str, Any]]:
    """Per measured point: a single env's step time at most STEP_TIME_TARGET x Gymnasium's, any
    other front's env-steps/s at least TARGET x the original's."""
    targets = []
    for dispatch, child in configurations.items():
        for p in (p for p in child["points"] if p["status"] == "ok"):
            if p["game"] in GYMNASIUM_IDS and p["front"] == "make":
                value = 1.0 / p["jaxsim_over_original"]  # jaxsim's step time / Gymnasium's
                met, bound = value <= STEP_TIME_TARGET, {"max": STEP_TIME_TARGET}
                name = f"{GYMNASIUM_IDS[p['game']]} single-env step time, jaxsim / Gymnasium, at "
                name += f"most {STEP_TIME_TARGET:g}"
            else:
                value = p["jaxsim_over_original"]
                met, bound = value >= TARGET, {"min": TARGET}
                name = f"{p['game']} {p['front']} N={p['num_envs']}: jaxsim / original "
                name += f"env-steps/s, at least {TARGET:g}"
            status = "pass" if met else "fail"
            targets.append(
                {
                    "name": f"{name} ({dispatch})",
                    "value": value,
                    **bound,
                    "met": met,
                    "status": status,
                }
            )
    return targets


def table_of(configurations: dict[str, Any]) -> str:
    rows = []
    for dispatch, child in configurations.items():
        for p in child["points"]:
            head = [dispatch, p["game"], p["front"], p["num_envs"]]
            if p["status"] != "ok":
                rows.append([*head, p["status"], "", "", "", ""])
                continue
            rate = p["steps_per_s"]
            rows.append(
                [
                    *head,
                    format_rate(rate["jaxsim"]["median"]),
                    format_rate(rate["original"]["median"]),
                    f"{p['step_us']['jaxsim'] * p['num_envs']:.0f}",
                    f"{p['step_us']['original'] * p['num_envs']:.0f}",
                    f"{p['jaxsim_over_original']:.2f}x",
                ]
            )
    headers = ["dispatch", "game", "front", "N", "jaxsim env-steps/s", "original env-steps/s"]
    headers += ["jaxsim us/call", "original us/call", "jaxsim / original"]
    return format_table(headers, rows)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="3 repeats of 1000 env-steps")
    p.add_argument("--games", type=name_list(tuple(GAMES), "game(s)"), default=tuple(GAMES))
    p.add_argument("--fronts", type=name_list(FRONTS, "front(s)"), default=FRONTS)
    p.add_argument("--num-envs", type=int_list, default=None, help="only these batch sizes")
    p.add_argument(
        "--dispatch", type=name_list(DISPATCH, "configuration(s)"), default=DEFAULT_DISPATCH
    )
    p.add_argument("--steps", type=int, default=None, help="env-steps per side and sample")
    p.add_argument("--repeats", type=int, default=None, help="samples per side (median)")
    p.add_argument("--out", type=Path, default=None, help="JSON output path")
    p.add_argument("--child-out", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.steps is None:
        args.steps = 1000 if args.quick else 3000
    if args.repeats is None:
        args.repeats = 3 if args.quick else 7
    if args.steps < 8 or args.repeats < 1:
        p.error(f"--steps must be >= 8 and --repeats >= 1, got {args.steps}, {args.repeats}")
    if args.child_out is not None:
        from atomicfiles import write_json_atomic

        result = run_child(args.dispatch[0], args)
        write_json_atomic(args.child_out, result)
        return 0
    from benchmarks.harness.provenance import provenance
    from benchmarks.harness.record import default_out, finish

    prov = provenance(["gymnasium", "MinAtar", "stable-baselines3"])  # its load: the start's
    t0 = time.perf_counter()
    configurations = {d: _spawn(d, args) for d in args.dispatch}
    table = table_of(configurations)
    results = [
        {**point, "dispatch": d, "impl": "jaxsim_vs_original"}
        for d, child in configurations.items()
        for point in child["points"]
    ]
    record = {
        "benchmark": "front",
        "quick": args.quick,
        "provenance": prov,
        "note": (
            "host-stepped fronts, uniform random actions, every output read on the host each "
            "step; env-steps/s medians over repeats, ratio = median of paired per-repeat "
            "ratios (jaxsim over original: the minatar package or Gymnasium), each side the same "
            "steps in alternating order; each dispatch configuration in its own process"
        ),
        "steps_per_sample": args.steps,
        "repeats": args.repeats,
        "configurations": {
            d: {k: v for k, v in c.items() if k != "points"} for d, c in configurations.items()
        },
        "results": results,
        "targets": targets_of(configurations),
        "loadavg_1_5_15min_end": [round(x, 2) for x in os.getloadavg()],
        "wall_s": round(time.perf_counter() - t0, 1),
        "table": table,
    }
    return finish(record, args.out or default_out("front", args.quick), table)


if __name__ == "__main__":
    sys.exit(main())
