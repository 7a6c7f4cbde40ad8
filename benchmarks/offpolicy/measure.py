"""On-policy vs off-policy: the share of training time spent simulating, PPO beside DQN/SAC.

Usage:
  python -m benchmarks.offpolicy.measure          # 10 traced + 10 timed updates a case; SB3: 3
  python -m benchmarks.offpolicy.measure --quick  # 3 + 3, SB3 1 shorter round; minutes on 2 cores
  python -m benchmarks.offpolicy.measure --no-gym-loops  # the one-jit jaxsim loops only

RL-Scope (arXiv 2102.04285) found on-policy algorithms at least 3.5x more simulation-bound than
off-policy ones. Pairs share an environment: PPO vs DQN on CartPole-v1, PPO vs SAC on
Pendulum-v1; a pair's ratio is PPO's simulation share over the off-policy agent's. Each is
measured two ways, at fixed, stated hyperparameters (the share depends on gradient steps per
environment step):
- one-jit jaxsim loops: one update of `agents.train`'s algorithm at its preset, profiled by
  `benchmarks.breakdown.measure` (`jaxsim.profile`: device time per named phase, compile apart,
  trace overhead taken out) into its categories; DQN and SAC past `learning_starts`;
- loops stepping Gymnasium's CPU environments, as RL-Scope measured (it profiled
  stable-baselines): Stable-Baselines3's PPO, DQN and SAC at rl-baselines3-zoo's settings,
  simulation being the time in SB3's VecEnv (Gymnasium's env.step and SB3's bookkeeping; the
  env's own step recorded beside it) over `learn()`'s (`benchmarks.baselines.offpolicy_sb3`).
  Recorded as not measured, with the reason, where SB3 is not installed.
Writes runs/bench/offpolicy_<machine>[_quick].json with provenance and a PNG beside it
(`python -m benchmarks report --publish` copies a run's records into benchmarks/results/).
"""

from __future__ import annotations

import argparse
import traceback
from pathlib import Path

from benchmarks.baselines.offpolicy_sb3 import gymnasium_loops
from benchmarks.breakdown.cases import agent_case
from benchmarks.breakdown.measure import CATEGORIES, COLORS, measure
from benchmarks.harness.arguments import count, split_list, unknown_names
from benchmarks.harness.optional import not_measured
from benchmarks.harness.provenance import provenance
from benchmarks.harness.record import default_out, finish

# environment -> (on-policy, off-policy) algorithms compared on it
PAIRS = {"CartPole-v1": ("ppo", "dqn"), "Pendulum-v1": ("ppo", "sac")}
PUBLISHED = ">= 3.5x (RL-Scope, arXiv 2102.04285)"
# Env steps per timed SB3 learn(): 32 PPO iterations on CartPole (2 on Pendulum), 16 DQN rounds
# of 128 gradient steps, 2000 SAC gradient steps.
GYM_STEPS = {"ppo": 8192, "dqn": 4096, "sac": 2000}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.offpolicy.measure", description=__doc__)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--envs", default=",".join(PAIRS), help=f"of {', '.join(PAIRS)}")
    p.add_argument("--iterations", type=int, default=10, help="attributed traced updates")
    p.add_argument("--repeats", type=int, default=10, help="uninstrumented updates (at least)")
    p.add_argument("--min-time", type=float, default=1.0, help="seconds of calls per measurement")
    p.add_argument("--rounds", type=int, default=1, help="profiles per case (overhead error)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="3 traced and 3 timed updates")
    p.add_argument("--out", type=Path, default=None, help="JSON path (PNG written beside it)")
    p.add_argument("--trace-dir", type=Path, default=None, help="keep each case's trace here")
    p.add_argument(
        "--gym-loops",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also measure SB3's agents stepping Gymnasium's environments",
    )
    p.add_argument("--gym-rounds", type=count, default=3, help="timed SB3 learn() calls per case")
    p.add_argument(
        "--gym-steps",
        default=",".join(f"{k}={v}" for k, v in GYM_STEPS.items()),
        help="env steps per timed SB3 learn() call, per algorithm",
    )
    p.add_argument("--sb3-torch-threads", type=int, default=1, help="0: torch's default")
    return p


def compare(results: list[dict]) -> list[dict]:
    """Per environment: each algorithm's simulation share and PPO's over the off-policy one's."""
    ok = {(r["algorithm"], r["env"]): r for r in results if r["status"] == "ok"}
    rows = []
    for env_id, (on, off) in PAIRS.items():
        if (on, env_id) not in ok or (off, env_id) not in ok:
            continue
        on_share = ok[on, env_id]["category_shares"]["simulation"]
        off_share = ok[off, env_id]["category_shares"]["simulation"]
        rows.append(
            {
                "env": env_id,
                "on_policy": on,
                "off_policy": off,
                "on_policy_simulation_share": on_share,
                "off_policy_simulation_share": off_share,
                "ratio": on_share / off_share if off_share > 0 else None,
                "published": PUBLISHED,
            }
        )
    return rows


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.quick:
        args.iterations, args.repeats, args.min_time = 3, 3, 0.2
        args.gym_rounds, args.gym_steps = 1, "ppo=4096,dqn=1024,sac=500"
    gym_steps = _gym_steps(args.gym_steps)
    envs = split_list(args.envs)
    problem = unknown_names(envs, list(PAIRS), "environment(s)")
    if problem:
        raise SystemExit(problem)
    results = []
    for env_id in envs:
        for algorithm in PAIRS[env_id]:
            label = f"{algorithm}_{env_id}"
            print(f"[offpolicy] {label} ...", flush=True)
            try:
                record = measure(agent_case(args, algorithm, env_id), args)
            except Exception as e:  # one broken case must not lose the others' results
                record = not_measured({"case": label}, e, failed_key="error")
            results.append({"algorithm": algorithm, "env": env_id, **record})
    comparison = compare(results)
    if args.gym_loops:
        pairs = {env_id: PAIRS[env_id] for env_id in envs}
        try:
            loops = gymnasium_loops(pairs, gym_steps, args.gym_rounds, args.sb3_torch_threads)
        except Exception as e:  # the profiles above are kept whatever SB3 does
            traceback.print_exc()
            loops = {"measured": False, "reason": f"failed: {type(e).__name__}: {e}"}
    else:
        loops = {"measured": False, "reason": "--no-gym-loops"}
    out = args.out or default_out("offpolicy", args.quick)
    record = {
        "benchmark": "offpolicy",
        "provenance": provenance(["optax"]),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "categories": {k: list(v) for k, v in CATEGORIES.items()},
        "results": results,
        "comparison": comparison,
        "gymnasium_loops": loops,
    }
    png = _plot(results, out.with_suffix(".png"))
    failed = [r["case"] for r in results if r["status"] == "failed"]
    return finish(record, out, None, failed, beside=png)


def _plot(results, png: Path) -> Path | None:
    ok = [r for r in results if r["status"] == "ok"]
    if not ok:
        return None
    try:
        from jaxsim.profiler import plot_stacked

        title = "one update at each preset: where the time goes"
        plot_stacked({r["case"]: r["categories_s"] for r in ok}, png, title=title, colors=COLORS)
    except ImportError as e:
        print(f"PNG skipped: matplotlib is not installed ({e})")
        return None
    return png


def _gym_steps(text: str) -> dict[str, int]:
    """ "ppo=8192,dqn=4096" -> {"ppo": 8192, "dqn": 4096} over GYM_STEPS; a SystemExit naming
    the flag if malformed."""
    steps = dict(GYM_STEPS)
    for item in split_list(text):
        name, _, value = item.partition("=")
        if name not in GYM_STEPS or not value.isdigit() or int(value) < 1:
            raise SystemExit(
                f"--gym-steps: expected ALGORITHM=STEPS with ALGORITHM in {list(GYM_STEPS)} and "
                f"STEPS a positive integer, got {item!r}"
            )
        steps[name] = int(value)
    return steps


if __name__ == "__main__":
    raise SystemExit(main())
