"""Profile `jaxsim.rollout` by phase: `python -m benchmarks.micro.profile_rollout`.

  python -m benchmarks.micro.profile_rollout --env CartPole-v1 --num-envs 1024 --steps 128 -o prof/
  python -m jaxsim.profiler show prof/rollout_auto.json

Runs one rollout per iteration under an MLP or random policy, continuing from the last one's
final state, inside `jaxsim.profile` (the phase profiler, which knows no environment), and prints
the per-phase table; with `-o DIR` it writes `<name>.json`, `<name>.png` and the Perfetto trace.
"""

from __future__ import annotations

import argparse
import sys

import jax

import jaxsim
from benchmarks.harness.timing import continued_rollout
from jaxsim.profiler import DEFAULT_PHASES, ProfileReport, parse_phases


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.micro.profile_rollout",
        description="profile jaxsim.rollout under an MLP or random policy, by phase",
    )
    p.add_argument("--env", default="CartPole-v1", help="a jaxsim environment id")
    p.add_argument("--num-envs", type=int, default=1024)
    p.add_argument("--steps", type=int, default=128, help="steps per rollout (one iteration)")
    p.add_argument("--policy", choices=("mlp", "random"), default="mlp")
    p.add_argument("--backend", default="auto", help="jaxsim.rollout backend")
    p.add_argument("--iterations", type=int, default=10, help="attributed traced iterations")
    p.add_argument("--repeats", type=int, default=10, help="uninstrumented iterations")
    p.add_argument(
        "--min-time", type=float, default=0.2, help="seconds of timed calls at least (fast fns)"
    )
    p.add_argument("--phases", type=parse_phases, default=DEFAULT_PHASES, help="comma-separated")
    p.add_argument("-o", "--out", default=None, help="folder for JSON, PNG, Perfetto trace")
    p.add_argument("--name", default=None, help="file stem (default rollout_<backend>)")
    p.add_argument("--no-png", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    return p


def profile_rollout(args: argparse.Namespace) -> ProfileReport:
    env = jaxsim.make(args.env)
    key = jax.random.key(args.seed)
    if args.policy == "mlp":
        policy = jaxsim.init_mlp_policy(jax.random.fold_in(key, 1), env)
    else:
        policy = jaxsim.random_policy(env)
    # One rollout per iteration, continuing from the last one's final state.
    step = continued_rollout(
        env, policy, args.steps, num_envs=args.num_envs, key=key, backend=args.backend
    )
    return jaxsim.profile(
        step,
        phases=args.phases,
        iterations=args.iterations,
        repeats=args.repeats,
        min_time=args.min_time,
        out_dir=args.out,
        name=args.name or f"rollout_{args.backend}",
        png=not args.no_png,
    )


def main(argv: list[str] | None = None) -> ProfileReport:
    p = parser()
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        report = profile_rollout(args)
    except (ValueError, TypeError, OSError) as e:
        p.exit(2, f"error: {e}\n")
    print(report.format_table())
    return report


if __name__ == "__main__":
    main()
