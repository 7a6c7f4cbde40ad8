"""`python -m agents.train ppo --env gymnasium/CartPole-v1 ...`: PPO on a host simulator.

`agents.train` hands host ids (`gymnasium/<id>`, `envpool/<task>`, `MinAtar/<Game>-v0`) here.
Every PPOConfig field is a flag, over the preset of the same task (`CartPole-v1`, and
`gymnax/Breakout-MinAtar` for MinAtar Breakout). Writes to `--out`: checkpoint.msgpack +
config.json (the learner's state: `--resume` continues it; host environments cannot be saved,
so a resumed run starts fresh episodes), metrics.csv / .jsonl, curve.png, eval.json, and with
`--profile DIR` DIR/decoupled_profile.json (per thread: acting, waiting, learning). Ctrl-C and
SIGTERM stop after the update in flight, write a consistent checkpoint and exit 130 / 143.
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import numpy as np

from agents import logs
from agents.decoupled.host_envs import MissingDependency, make_pool
from agents.decoupled.learner import HostPPO, load_state, save_state
from agents.decoupled.run import SCHEDULES, DecoupledConfig, format_profile, run_decoupled
from agents.networks import to_policy
from agents.ppo import PPOConfig
from agents.presets import config_for
from agents.structs import Metrics
from agents.train_args import (
    add_config_flags,
    check_flag,
    check_no_run,
    check_out,
    clear_run,
    config_overrides,
)
from jaxsim.files import finite_json, write_json_atomic


def preset_id(env_id: str) -> str:
    """The preset (`agents.presets`) a host id trains with: its task's."""
    name = env_id.removeprefix("gymnasium/").removeprefix("envpool/")
    if name.startswith("MinAtar/"):
        return "gymnax/" + name.removeprefix("MinAtar/").rsplit("-v", 1)[0] + "-MinAtar"
    return name


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
    p.add_argument("--seed", type=int, default=0, help="PRNG seed (network, actions, pools)")
    p.add_argument("--seeds", type=int, default=1, help="must be 1 in the decoupled mode")
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
    add_config_flags(p, PPOConfig, "(defaults: the task's preset)")
    return p


def host_evaluate(learner: HostPPO, state, env_id: str, seed: int, max_steps: int) -> np.ndarray:
    """Returns of the first episode of each of `eval_envs` environments, deterministic policy
    (an episode still running after `max_steps` counts with its return so far)."""
    n = learner.config.eval_envs
    pool = make_pool(env_id, n, seed)
    acting = learner.acting(state)
    policy = jax.jit(lambda a, obs: to_policy(a.params, a.obs_stats, True)(jax.random.key(0), obs))
    returns, done = np.zeros(n), np.zeros(n, bool)
    try:
        rows = pool.reset()
        for _ in range(max_steps):
            action = np.asarray(policy(acting, rows.obs)[0])
            pool.send(action, rows.env_ids)
            rows = pool.recv()
            live = rows.transition & ~done[rows.env_ids]
            returns[rows.env_ids[live]] += rows.reward[live]
            done[rows.env_ids[live & (rows.terminated | rows.truncated)]] = True
            if done.all():
                break
    finally:
        pool.close()
    return returns


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


def main(argv: list[str] | None = None) -> dict:
    """Runs the command; returns a summary (paths, evaluation, profile) for tests and scripts."""

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.algorithm != "ppo":
        parser.error(f"the decoupled mode (--env {args.env}) runs ppo, not {args.algorithm!r}")
    if args.seeds != 1:
        parser.error(f"--seeds must be 1 for a host environment, got {args.seeds}")
    check_flag(parser, "--checkpoint-every", args.checkpoint_every, ge=0)
    try:
        config = config_for(preset_id(args.env), "ppo", **config_overrides(args, PPOConfig))
        dc = decoupled_config(args)
        dc.check(config)
        out = args.out or os.path.join("runs", args.env.replace("/", "_"))
        check_out(out)
        if args.resume and args.overwrite:
            raise ValueError("--resume continues the run in --out, --overwrite replaces it")
        if not args.resume:
            check_no_run(out, args.overwrite)
        if args.profile is not None:
            check_out(args.profile)
        probe = make_pool(args.env, 1, args.seed)  # the spaces; fails early on a missing extra
        spaces, max_steps = (probe.observation_space, probe.action_space), probe.max_episode_steps
        probe.close()
        learner = HostPPO(config, *spaces, args.env, vtrace=args.schedule == "free")
    except (ValueError, TypeError, MissingDependency) as e:
        parser.error(str(e))
    if args.overwrite:  # every check passed: only now is the old run given up
        clear_run(out)
    ckpt_path = os.path.join(out, "checkpoint.msgpack")
    meta = {
        "algorithm": "ppo",
        "env_id": args.env,
        "schedule": dc.schedule,
        "actors": dc.actors,
        "seed": dc.seed,
        "config": config.to_dict(),
    }
    rows, wall_offset = [], 0.0
    if args.resume:
        if not os.path.exists(ckpt_path):
            parser.error(f"--resume: no checkpoint at {ckpt_path}")
        state, saved = load_state(ckpt_path, learner)
        differ = [k for k in meta if saved.get(k) != meta[k]]
        if differ:
            parser.error(
                f"--resume: {ckpt_path} was written with other {', '.join(differ)} "
                f"({ {k: saved.get(k) for k in differ} }); pass the same flags, or a new --out"
            )
        rows = [r for r in logs.read_metrics(out) if r["update"] <= int(state.update)]
        wall_offset = saved.get("wall_time", 0.0)
    else:
        state = learner.init(jax.random.key(args.seed))
    label = f"ppo {args.env} {dc.schedule}"
    progress = logs.TrainingProgress(
        1, config.num_updates, label, None if args.quiet else sys.stdout, rows, wall_offset
    )
    last = {"return": np.nan, "episodes": 0}

    def save(state) -> None:
        logs.write_metrics(out, progress.rows)
        save_state(ckpt_path, state, {**meta, "wall_time": progress.wall_time()})

    def on_update(state, report) -> None:
        if len(report.episode_returns):
            last["return"] = float(report.episode_returns.mean())
        last["episodes"] += len(report.episode_returns)
        u = report.update
        if u % config.log_every == 0 or u == config.num_updates:
            one = np.ones(1, np.float32)
            metrics = Metrics(
                update=np.array([u]),
                steps=np.array([report.env_steps]),
                mean_return=last["return"] * one,
                episodes=last["episodes"] * one,
                loss=jax.tree.map(lambda x: np.float32(x) * one, report.loss),
            )
            progress.report_chunk(u, report.env_steps, metrics)
            last["episodes"] = 0
        if args.checkpoint_every and u % args.checkpoint_every == 0:
            save(state)

    # The profile leaves out the first two updates (compiling the update and the policy).
    skip = 2 if config.num_updates - int(state.update) > 2 else 0
    result = run_decoupled(learner, dc, state, config.num_updates, on_update, profile_after=skip)
    save(result.state)
    if result.interrupted is not None:
        print(
            f"[{label}] {result.interrupted}: stopped after update {int(result.state.update)}; "
            f"checkpoint in {ckpt_path} (--resume continues it)",
            file=sys.stderr,
        )
        raise SystemExit(143 if result.interrupted == "SIGTERM" else 130)
    eval_seed = int(np.random.SeedSequence([args.seed, 1]).generate_state(1)[0] % 2**30)
    returns = host_evaluate(learner, result.state, args.env, eval_seed, max_steps or 27_000)
    evaluation = {
        "env": args.env,
        "deterministic": True,
        "episodes": config.eval_envs,
        "mean_return": float(returns.mean()),
        "returns": returns.tolist(),
        "steps": int(result.state.update) * config.batch_size,
        "wall_time": progress.wall_time(),
    }
    write_json_atomic(os.path.join(out, "eval.json"), finite_json(evaluation))
    curve = None
    if not args.no_plot and progress.rows:
        title = f"PPO on {args.env} ({dc.schedule}, {dc.actors} actors)"
        curve = logs.plot_curve(progress.rows, os.path.join(out, "curve.png"), title)
    print(
        f"[{label}] evaluation (deterministic, {config.eval_envs} episodes): "
        f"{returns.mean():.1f}; outputs in {out}"
    )
    if args.profile is not None:
        print(format_profile(result.profile))
        path = os.path.join(args.profile, "decoupled_profile.json")
        write_json_atomic(path, finite_json({"label": label, "threads": result.profile}))
    return {
        "out": out,
        "checkpoint": ckpt_path,
        "curve": curve,
        "eval": evaluation,
        "profile": result.profile,
        "state": result.state,
    }
