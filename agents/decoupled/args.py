"""The decoupled train command's flags: every PPOConfig field over the task's preset, the
arrangement (`DecoupledConfig`) and the run's own flags."""

from __future__ import annotations

import argparse

from agents import compile_cache
from agents.decoupled.run import SCHEDULES, DecoupledConfig
from agents.loop import MIN_EPISODES
from agents.ppo import PPOConfig
from agents.presets import target_for
from agents.train_args import add_config_flags, target_return


def preset_id(env_id: str) -> str:
    """The preset (`agents.presets`) a host id trains with: its task's."""
    name = env_id.removeprefix("gymnasium/").removeprefix("envpool/")
    if name.startswith("MinAtar/"):
        return "gymnax/" + name.removeprefix("MinAtar/").rsplit("-v", 1)[0] + "-MinAtar"
    return name


def task_target(env_id: str) -> float | None:
    """The preset target return of a host id's task (`CartPole-v1` for `envpool/CartPole-v1`,
    `MinAtar/Breakout-v0` for `gymnasium/MinAtar/Breakout-v0`), or None."""
    return target_for(env_id.removeprefix("gymnasium/").removeprefix("envpool/"), "ppo")


def build_parser() -> argparse.ArgumentParser:

    p = argparse.ArgumentParser(
        prog="python -m agents.train",
        description="PPO on a host simulator: actor threads step it, a learner runs the "
        "one-jit update.",
    )
    p.add_argument("algorithm", help="ppo (the decoupled mode runs PPO)")
    p.add_argument(
        "--env", required=True, help="gymnasium/<id> (original MinAtar too), envpool/<task>"
    )
    p.add_argument(
        "--seed", type=int, default=0, help="PRNG seed (network, actions, pools), 0 to 2**63-1"
    )
    p.add_argument(
        "--seeds", type=int, default=1, help="seeds --seed, --seed+1, ... one after another"
    )
    p.add_argument("--out", default=None, help="output folder (default runs/<env>)")
    p.add_argument("--checkpoint-every", type=int, default=0, help="updates between checkpoints")
    p.add_argument("--resume", action="store_true", help="continue <out>/checkpoint.msgpack")
    p.add_argument("--overwrite", action="store_true", help="replace the run in --out")
    p.add_argument("--schedule", choices=list(SCHEDULES), default="reproducible")
    p.add_argument("--actors", type=int, default=2, help="actor threads (must divide num_envs)")
    p.add_argument("--queue-size", type=int, default=1, help="segments an actor may run ahead")
    p.add_argument(
        "--envpool-batch-size",
        type=int,
        default=None,
        help="per actor; below its envs EnvPool runs asynchronously (free schedule only)",
    )
    p.add_argument("--vectorization", choices=("sync", "async"), default="sync")
    p.add_argument("--no-plot", action="store_true", help="skip curve.png")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--profile", metavar="DIR", default=None, help="per-thread phase table")
    p.add_argument(
        "--target-return",
        type=target_return,
        default=None,
        help="stop once a stop check (eval_envs deterministic episodes every log_every updates) "
        f"and an independent evaluation confirming it (>= {MIN_EPISODES} episodes, the final "
        "evaluation's) reach this mean return; 'none' trains the whole budget (default: the "
        "task's preset target, agents.presets.TARGETS; with --resume, the run's)",
    )
    p.add_argument(
        "--compilation-cache",
        metavar="DIR",
        default=None,
        help="JAX's persistent compilation cache folder (default: "
        f"${compile_cache.ENV_VAR}, else ~/.cache/jaxsim/xla)",
    )
    p.add_argument("--no-compilation-cache", action="store_true", help="compile afresh")
    p.add_argument(
        "--time-budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop after the first update that ends this many wall seconds into training "
        "(the metrics' wall_time: compiles and stop checks in, imports out), as if the budget "
        "of steps had run out",
    )
    add_config_flags(p, PPOConfig, "(defaults: the task's preset)")
    return p


def decoupled_config(args: argparse.Namespace) -> DecoupledConfig:
    """The arrangement the flags ask for (by name: a field added to DecoupledConfig shifts
    nothing)."""
    return DecoupledConfig(
        args.env,
        schedule=args.schedule,
        actors=args.actors,
        queue_size=args.queue_size,
        envpool_batch_size=args.envpool_batch_size,
        vectorization=args.vectorization,
        seed=args.seed,
    )
