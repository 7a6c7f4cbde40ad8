"""jaxsim's agents beside the JAX training stacks a user would pick: brax's trainers, rejax, SBX.

Usage:
  bash benchmarks/peers/setup_envs.sh                # once: the peers' own venvs (.peer_envs/)
  python -m benchmarks.peers.measure                      # brax speed + time to 1000, rejax PPO/DQN
  python -m benchmarks.peers.measure --cases rejax_ppo --seeds 1
  python -m benchmarks.peers.measure --cases brax_sac_solve --seeds 3   # brax: one process per seed
  python -m benchmarks.peers.measure --cases brax_ppo_speed_ant
  python -m benchmarks.peers.measure --smoke                 # tiny budgets: checks that it runs

Each peer runs in a venv of its own (its pins conflict with jaxsim's: brax 0.14's trainers need a
jax before 0.10, rejax 0.1.3 a gymnax before 1.0) as a subprocess of this run on the same CPU,
printing one JSON line; a peer whose venv is absent is skipped with the command that makes it.
The record names the jax each side ran under. Both sides are judged by one rule,
`agents.loop.confirmed`: a seed is solved when its deterministic stop check reaches the target
and an independent deterministic evaluation (>= 32 episodes, keys apart) does too. Each figure
has the 1-minute load average beside it: these machines are shared.
Cases:
  brax_ppo_speed  training env-steps/s of the whole loop, compile apart, at brax's published
                  inverted_pendulum settings, both networks jaxsim's 64-64 (brax's own networks
                  measured beside); target jaxsim/brax >= 1.0x.
  brax_ppo_speed_ant  the same at brax's published ant settings (4096 envs, 327,680 env steps
                  per training step), one timed training step per side; beside them, ant
                  stepped alone (brax's own step under both venvs' jax, jaxsim's rollout) splits
                  the ratio into the jax version, the stepping and the loops (`stepping`,
                  `comparison.split`). Time to a score on ant is out of scope (brax's 50M-step
                  budget is hours on a CPU).
  brax_ppo_solve  training time (compile in, evaluations out) to an evaluation return of 1000 on
                  inverted_pendulum: brax's published settings and networks, jaxsim's loop at
                  them (64-64 networks); target >= 2x sooner.
  brax_sac_solve  training time per seed (compile in, evaluations out) to an evaluation return
                  of 1000 on inverted_pendulum: brax's SAC trainer (one process per seed) at its
                  SAC test's settings (it publishes none for inverted_pendulum; its notebook's
                  hopper settings solved later, brax_case.BRAX_SAC_SETTINGS), its own 256-256
                  networks; jaxsim's SAC preset for brax/inverted_pendulum, every seed
                  at once (`agents.train sac --seeds N`), its time / N; target >= 2x sooner.
  rejax_ppo, rejax_dqn  time per seed to 475 on CartPole-v1, every seed at once on both sides:
                  jaxsim's agents.train preset vs rejax's published gymnax config; target >= 2x.
  rejax_ppo_breakout  the same on gymnax's Breakout-MinAtar (jaxsim through its gymnax adapter)
                  to 5, a score rejax's published run reaches (benchmarks/peers/rejax_case.py).
  sbx_ppo, sbx_dqn, sbx_sac  time per seed to solve CartPole-v1 (475; PPO, DQN) and Pendulum-v1
                  (-200; SAC), whole processes as users run them: `python -m agents.train`
                  (the preset, every seed at once; cold and warm compilation cache) vs one SBX
                  process per seed at rl-zoo's settings (benchmarks/peers/sbx_case.py); >= 2x.
Every case runs under a time limit (--case-timeout-s): past it, its peer process (and that
process's own children) is stopped and the case recorded as timed out, and the run goes on to
the next case; a case stuck where Python cannot stop it (inside XLA) gets HARD_STOP_GRACE_S more,
then the run writes its record, that case timed out and the ones after it not run, and exits.
Writes runs/bench/peers_<machine>[_smoke].json with provenance.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.harness.arguments import positive_seconds, split_list, unknown_names
from benchmarks.harness.commands import portable_command
from benchmarks.harness.paths import REPO_ROOT, RUNS_DIR
from benchmarks.harness.record import append_jsonl, finish
from benchmarks.harness.runner import stop_process_group
from benchmarks.peers import brax_case, rejax_case, sbx_case
from benchmarks.peers.suite import summary
from jaxsim.envs import size_cpu_pool

SPEED_CASES = {"brax_ppo_speed": "inverted_pendulum", "brax_ppo_speed_ant": "ant"}
CASES = (
    *SPEED_CASES,
    "brax_ppo_solve",
    "brax_sac_solve",
    "rejax_ppo",
    "rejax_dqn",
    "rejax_ppo_breakout",
    *sbx_case.CASES,  # sbx_ppo, sbx_dqn, sbx_sac
)
HERE = Path(__file__).resolve().parent
SETUP = "bash benchmarks/peers/setup_envs.sh"
SPEED_TARGET, SOLVE_TARGET = 1.0, 2.0
TARGET = rejax_case.CARTPOLE_TARGET  # CartPole-v1's return to solve, every algorithm


def peer_python(peer: str) -> Path:
    """The python of `peer`'s venv under $PEER_ENVS (default: .peer_envs/ in the repository)."""
    default = REPO_ROOT / ".peer_envs"
    return Path(os.environ.get("PEER_ENVS", default)) / peer / "bin" / "python"


def peer_missing(peer: str) -> str | None:
    """None if `peer`'s venv exists, else why it is skipped and the command that makes it."""
    python = peer_python(peer)
    if python.exists():
        return None
    return f"{peer}'s venv is absent ({python} not found); install with: {SETUP} {peer}"


# A case's time limit unless --case-timeout-s says otherwise: the longest recorded case
# (brax_sac_solve, three brax processes) took under half of it on 2 cores.
CASE_TIMEOUT_S = 2 * 3600.0
# How long past its limit a case stuck where no Python runs (inside XLA, where the limit's
# signal cannot stop it) is given before the run writes its record and exits.
HARD_STOP_GRACE_S = 60.0


class CaseTimeout(Exception):
    """A case, or one of its peer processes, ran past its time limit."""


@contextlib.contextmanager
def time_limit(seconds: float, on_hang: Callable[[], None]) -> Iterator[None]:
    """Raises CaseTimeout in this (the main) thread once `seconds` have passed, wherever the
    case is (waiting on a peer process, `run_peer` then stops it, or in jaxsim's own loop); calls
    `on_hang` from another thread HARD_STOP_GRACE_S later if the case has still not ended."""

    def expire(signum, frame):
        raise CaseTimeout(f"ran past its {seconds:g} s limit (--case-timeout-s)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    hang = threading.Timer(seconds + HARD_STOP_GRACE_S, on_hang)
    hang.daemon = True
    hang.start()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        hang.cancel()


def run_peer(
    peer: str, script: str, args: list[str], timeout_s: float, python: str | None = None
) -> dict[str, Any]:
    """Runs benchmarks/peers/<script> under `peer`'s venv (or `python`: jaxsim's own, for what
    the peer's code does under jaxsim's jax); its last stdout line, parsed. The child's process
    wall time (start-up and imports in) is kept as `outer_wall_s`. Past `timeout_s` (or the
    case's limit) the child and every process it started are stopped: CaseTimeout."""
    cmd = [python or str(peer_python(peer)), str(HERE / script), *args]
    print(f"[peers] {peer}: benchmarks/peers/{script} {portable_command(args)}", flush=True)
    t = time.perf_counter()
    # Files, not pipes: a process the peer leaves behind cannot keep this run waiting for the
    # end of its output; its own process group, so that stopping it stops its helpers too.
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        proc = subprocess.Popen(
            cmd, cwd=REPO_ROOT, stdout=stdout, stderr=stderr, text=True, start_new_session=True
        )
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise CaseTimeout(f"{peer}'s {script} ran past its {timeout_s:g} s limit") from None
        finally:
            stop_process_group(proc)  # at once if it ended (a timeout, Ctrl-C, the case's limit)
        stdout.seek(0)
        stderr.seek(0)
        out, err = stdout.read(), stderr.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{peer} exited {proc.returncode}:\n{err[-3000:]}")
    result = json.loads(out.strip().splitlines()[-1])
    result["outer_wall_s"] = time.perf_counter() - t
    result["command"] = portable_command([cmd[0], f"benchmarks/peers/{script}", *args])
    return result


def _verdict(value: float | None, target: float) -> dict[str, Any]:
    return {
        "ratio": value,
        "target": f">= {target:g}x",
        "target_met": None if value is None else value >= target,
    }


# Timed training steps per side (after brax's two compiling epochs and jaxsim's compiling first
# chunk): ant's published batch is 327,680 env steps per training step, 2x inverted_pendulum's,
# on a dearer simulator, so it times one to keep each side to minutes on 2 cores; the batch
# shape stays brax's.
SPEED_REPEATS = {"inverted_pendulum": 3, "ant": 1}
# ant's stepping alone (`step_rows`): its envs, 16 steps a call (a rate: 80 would take minutes).
STEP_STEPS = 16
# Smoke runs only (nothing there is a result): ant's envs and batch / 16 on both sides, so that
# checking the case runs does not cost a full-batch compile and step.
SMOKE_SHRINK = {"inverted_pendulum": 1, "ant": 16}


def brax_speed(env: str, smoke: bool) -> dict[str, Any]:
    """jaxsim's loop and brax's trainer at brax's settings for `env`; for inverted_pendulum,
    brax's own networks and jaxsim's environment alone beside."""
    chunk, repeats = (1, 1) if smoke else (1, SPEED_REPEATS[env])
    shrink = SMOKE_SHRINK[env] if smoke else 1
    extras = env == "inverted_pendulum" and not smoke
    jx = brax_case.jaxsim_speed(env, chunk, repeats, shrink)
    # Where the loop's time goes: the same envs and steps stepped alone, no learning.
    env_only = brax_case.rollout_only_speed(env, repeats) if extras else None
    # Two more epochs than timed repeats: brax's trainer compiles during its first two.
    args = ["speed", "--env", env, "--epochs", str(repeats + 2), "--steps-per-epoch", str(chunk)]
    args += ["--shrink", str(shrink)] if shrink > 1 else []
    brax = run_peer("brax", "peer_brax.py", args, 3600)
    brax_own = (
        run_peer("brax", "peer_brax.py", [*args, "--network", "brax"], 3600) if extras else None
    )
    steps = step_rows(env) if env == "ant" and not smoke else None
    return {
        "env": env,
        "timed_training_steps": repeats * chunk,
        "batch_shrink": shrink,  # 1: brax's published envs and batch
        "jaxsim": jx,
        "jaxsim_env_only": env_only,
        "brax": brax,
        "brax_own_networks": brax_own,
        "stepping": steps,
        "comparison": {
            "metric": "training env-steps/s, jaxsim's loop / brax's trainer (both 64-64 nets)",
            **_verdict(brax_case.ratio(jx["sps"], brax["steady_sps"]), SPEED_TARGET),
            **({"split": brax_case.split_gap(jx, brax, steps)} if steps else {}),
        },
    }


def step_rows(env: str) -> dict[str, Any]:
    """`env` stepped alone, no learning, at brax's published envs: brax's own step
    (`peer_brax.py step`) under the brax venv's jax and under jaxsim's, and jaxsim's rollout
    through its adapter (the loop's compile options). Together they split a loop's gap to brax's
    trainer: the jax each side runs, the stepping, and the rest of each loop."""
    p = brax_case.published(env)
    args = ["step", "--env", env, "--num-envs", str(p["num_envs"]), "--steps", str(STEP_STEPS)]
    args += ["--repeats", "3", "--episode-length", str(p["episode_length"])]
    script = "peer_brax.py"
    return {
        "brax_own_jax": run_peer("brax", script, args, 1800),
        "brax_jaxsim_jax": run_peer("brax", script, args, 1800, python=sys.executable),
        "jaxsim": brax_case.rollout_only_speed(env, 3, num_steps=STEP_STEPS),
    }


def brax_solve(smoke: bool) -> dict[str, Any]:
    """Time to an evaluation return of 1000 on inverted_pendulum, each side at its best settings:
    jaxsim's PPO preset for it, brax's published settings with brax's networks."""
    budget = 163_840 * 2 if smoke else None  # brax's: two of its updates
    # jaxsim's: two of its preset's updates (8,192 env steps each).
    jx = brax_case.jaxsim_solve("inverted_pendulum", **({"total_steps": 16_384} if smoke else {}))
    # brax at its best published setting: its own networks (recorded run 1 gave it jaxsim's
    # 64-64 ones, with which brax's settings did not reach 1000 in 3.1M steps).
    args = ["solve", "--network", "brax", "--target", str(brax_case.TARGETS["inverted_pendulum"])]
    args += ["--num-timesteps", str(budget), "--num-evals", "3"] if smoke else []
    brax = run_peer("brax", "peer_brax.py", args, 3600)
    theirs = brax_case.brax_solve_summary(brax)
    both = jx["solved"] and theirs["solved"]
    return {
        "env": "inverted_pendulum",
        "target": brax_case.TARGETS["inverted_pendulum"],
        "jaxsim": jx,
        "brax": {**brax, "summary": theirs},
        "comparison": {
            "metric": "training wall-clock to the confirmed return, brax / jaxsim",
            **_verdict(
                brax_case.ratio(theirs["train_wall_s_to_target"], jx["train_wall_s_to_target"])
                if both
                else None,
                SOLVE_TARGET,
            ),
        },
    }


def brax_sac_solve(seeds: int, smoke: bool) -> dict[str, Any]:
    """jaxsim's SAC preset (every seed at once) and brax's SAC trainer (a process per seed) on
    inverted_pendulum to a confirmed evaluation return of 1000."""
    from benchmarks.peers.jaxsim_solve import solve_preset

    env, target = "inverted_pendulum", brax_case.TARGETS["inverted_pendulum"]
    budget = brax_case.SAC_SMOKE_STEPS if smoke else None
    with tempfile.TemporaryDirectory(prefix="jaxsim-xla-") as cache:
        jx = solve_preset("sac", f"brax/{env}", seeds, cache, target, budget)
    runs = [
        run_peer("brax", "peer_brax.py", brax_case.brax_sac_args(s, target, smoke), 3600)
        for s in range(seeds)
    ]
    theirs = brax_case.brax_sac_summary(runs)
    ours = jx["train_wall_s_per_seed"] if jx["solved_all"] else None
    return {
        "env": env,
        "target": target,
        "jaxsim": jx,
        "brax": {**theirs, "runs": runs},
        "comparison": {
            "metric": "training wall-clock per seed to the confirmed return (compile in, "
            "evaluations out), brax / jaxsim: brax's mean over its processes (one seed each), "
            "jaxsim's every seed at once divided by the seeds (as `agents.train --seeds`)",
            **_verdict(
                brax_case.ratio(theirs["train_wall_s_per_seed"], ours)
                if theirs["solved_all"]
                else None,
                SOLVE_TARGET,
            ),
        },
    }


def rejax_solve(name: str, seeds: int, smoke: bool) -> dict[str, Any]:
    """jaxsim's `agents.train` preset and rejax's published config, one environment, to the
    case's target (`rejax_case.CASES[name]`)."""
    from benchmarks.peers.jaxsim_solve import solve_preset

    case = rejax_case.CASES[name]
    budget = case.smoke_steps if smoke else None
    solve = (case.algorithm, case.env_id, seeds)
    with tempfile.TemporaryDirectory(prefix="jaxsim-xla-") as cache:
        cold = solve_preset(*solve, cache, case.target, budget, case.jaxsim_overrides)
        # Warm: a new agent loading its executables from the persistent cache the cold run filled.
        warm = (
            None if smoke else solve_preset(*solve, cache, case.target, None, case.jaxsim_overrides)
        )
    rj = run_peer("rejax", "peer_rejax.py", rejax_case.peer_args(case, seeds, smoke), 3600)
    rejax = {**rj, **rejax_case.peer_summary(rj, seeds)}
    rj_per_seed = rejax["train_wall_s_per_seed"]
    rj_without = rejax["train_wall_s_per_seed_without_first_chunk"]

    def versus(jx, key: str, theirs) -> float | None:
        return brax_case.ratio(theirs, jx[key]) if jx and jx["solved_all"] else None

    # rejax's init (and its compile) counted as jaxsim's is: the like-for-like figures (records
    # from before `init_s` was kept fall back to rejax's training wall alone).
    rj_init_in = rejax["train_wall_s_per_seed_init_in"] or rj_per_seed
    ratios = {
        "cold": versus(cold, "train_wall_s_per_seed", rj_init_in),
        "warm": versus(warm, "train_wall_s_per_seed", rj_init_in),
        "without_compile": versus(cold, "train_wall_s_per_seed_without_compile", rj_without),
        # rejax's init left out, jaxsim's in: the figure records before init_s reported.
        "cold_rejax_init_out": versus(cold, "train_wall_s_per_seed", rj_per_seed),
    }
    return {
        "env": case.env_id,
        "target": case.target,
        "jaxsim": cold,
        "jaxsim_warm": warm,
        "rejax": rejax,
        "comparison": {
            "metric": "training wall-clock per seed to the confirmed return (all seeds at once, "
            "divided by the seeds; init and compile in, evaluations out), rejax / jaxsim; "
            "`ratio` is jaxsim's cold run (a fresh compilation cache) against rejax as users "
            "run it",
            **_verdict(ratios["cold"], SOLVE_TARGET),
            "ratios": ratios,
        },
    }


def sbx_solve(case: str, seeds: int, smoke: bool) -> dict[str, Any]:
    """jaxsim's train command and SBX's processes, each seed to its confirmed solve."""
    algorithm, env_id, target = sbx_case.CASES[case]
    jx = sbx_case.jaxsim_side(case, seeds, smoke)
    runs = [
        run_peer("sbx", "peer_sbx.py", sbx_case.sbx_args(case, s, smoke), 3600)
        for s in range(seeds)
    ]
    theirs = sbx_case.sbx_summary(runs)

    def versus(label: str) -> float | None:
        ours = jx.get(label)
        if not ours or not ours["solved_all"] or not theirs["solved_all"]:
            return None
        return brax_case.ratio(theirs["per_seed_wall_s"], ours["per_seed_wall_s"])

    ratios = {"cold": versus("cold"), "warm": versus("warm")}
    return {
        "env": env_id,
        "algorithm": algorithm,
        "target": target,
        "jaxsim": jx,
        "sbx": {**theirs, "runs": runs},
        "comparison": {
            "metric": "whole-process wall time per seed to the confirmed return (start to exit, "
            "imports, compile and evaluations in), SBX / jaxsim; jaxsim trains every seed in one "
            "process (its wall / seeds), SBX one process per seed (their mean); `ratio` is "
            "jaxsim's cold run (a fresh compilation cache)",
            **_verdict(ratios["cold"], SOLVE_TARGET),
            "ratios": ratios,
        },
    }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.peers.measure", description=__doc__)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--cases", default=",".join(CASES), help=f"of {', '.join(CASES)}")
    p.add_argument("--seeds", type=int, default=3, help="brax_sac, rejax and sbx cases: seeds")
    p.add_argument("--smoke", action="store_true", help="tiny budgets, 1 seed: checks it runs")
    p.add_argument("--out", type=Path, default=None, help="result JSON (default runs/bench/...)")
    p.add_argument(
        "--case-timeout-s",
        type=positive_seconds,
        default=CASE_TIMEOUT_S,
        help=f"each case's time limit; past it the case is recorded as timed out "
        f"(default {CASE_TIMEOUT_S:g})",
    )
    return p


def measure_case(name: str, seeds: int, smoke: bool) -> dict[str, Any]:
    """One case's result (its peer's venv present)."""
    if name in SPEED_CASES:
        return brax_speed(SPEED_CASES[name], smoke)
    if name == "brax_sac_solve":
        return brax_sac_solve(seeds, smoke)
    if name == "brax_ppo_solve":
        return brax_solve(smoke)
    if name in sbx_case.CASES:
        return sbx_solve(name, seeds, smoke)
    return rejax_solve(name, seeds, smoke)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    cases = split_list(args.cases)
    problem = unknown_names(cases, list(CASES), "case(s)")
    if args.seeds < 1:
        problem = problem or f"--seeds must be >= 1, got {args.seeds}"
    if problem:
        raise SystemExit(f"benchmarks.peers: {problem}")
    # brax's cases size XLA's CPU pool before JAX starts (brax's deadlock on a small pool;
    # jaxsim.cpu_threads): jaxsim's side here, brax's trainer in its subprocess (it inherits
    # NPROC), so both sides run on the same pool; provenance records NPROC.
    if any(name.startswith("brax_") for name in cases):
        note = size_cpu_pool("brax/ant")  # the same for every brax id
        if note:
            print(f"[peers] {note}", flush=True)
    from benchmarks.harness.provenance import machine_tag, provenance  # imports jax

    seeds = 1 if args.smoke else args.seeds
    out = args.out or RUNS_DIR / f"peers_{machine_tag()}{'_smoke' if args.smoke else ''}.json"
    partial = out.with_suffix(".partial.jsonl")
    record: dict[str, Any] = {
        "benchmark": "peers",
        "provenance": provenance(["optax", "flax", "brax", "gymnax"]),
        "smoke": args.smoke,
        "config": {"cases": cases, "seeds": seeds},
        "load_start": os.getloadavg()[0],
        "cases": {},
    }
    t0, failures = time.perf_counter(), []

    def stuck(name: str) -> None:
        """`name` is stuck past its limit where no signal reaches: the record as it stands,
        that case timed out and the rest not run, then exit (from the watchdog's thread)."""
        limit = args.case_timeout_s
        why = f"ran past its {limit:g} s limit and was stuck {HARD_STOP_GRACE_S:g} s more"
        record["cases"][name] = {"timed_out": f"{why}: the run stopped", "limit_s": limit}
        append_jsonl(partial, {name: record["cases"][name]})
        for later in cases[cases.index(name) + 1 :]:
            record["cases"][later] = {"skipped": f"not run: the run stopped when {name} hung"}
        record["wall_s"] = round(time.perf_counter() - t0, 1)
        finish(record, out, summary(record), [*failures, name], partial=partial)
        os._exit(1)

    for name in cases:
        peer = name.split("_")[0]
        missing = peer_missing(peer)
        print(f"[peers] {name} ...", flush=True)
        if missing:
            result: dict[str, Any] = {"skipped": missing}
        else:
            try:
                with time_limit(args.case_timeout_s, lambda name=name: stuck(name)):
                    result = measure_case(name, seeds, args.smoke)
            except CaseTimeout as e:  # its processes are stopped; the others still run
                result = {"timed_out": str(e), "limit_s": args.case_timeout_s}
                failures.append(name)
            except Exception as e:  # one case's failure is recorded; the others still run
                result = {"failed": f"{type(e).__name__}: {e}"[-3000:]}
                failures.append(name)
        result["load_after"] = os.getloadavg()[0]
        record["cases"][name] = result
        append_jsonl(partial, {name: result})
    record["wall_s"] = round(time.perf_counter() - t0, 1)
    return finish(record, out, summary(record), failures, partial=partial)


if __name__ == "__main__":
    raise SystemExit(main())
