"""Command line: `python -m agents.train ppo|dqn|sac|pqn --env CartPole-v1 --seeds 4 --out DIR`.

Every field of the algorithm's config (`PPOConfig`, `DQNConfig`, `SACConfig`, `PQNConfig`) is a flag
(`--total-steps`, `--num-envs`, `--no-anneal-lr`, `--hidden 64,64`, ...; see `python -m
agents.train ALGORITHM --help`), on top of the environment's preset (`agents/presets.py`).
Seeds train at once as `jit(vmap(run))`, in chunks of `log_every` updates (`agents.loop`): a
progress line after each, and with a target return (the preset's, `--target-return`) a
deterministic evaluation (the stop check) after each; a seed it finds at the target is solved
once an independent evaluation (the final one of eval.json, >= 32 episodes) confirms it, and is
frozen there; the run ends once all are.
The loop holds no host callback, so JAX's persistent compilation cache keeps it (on by
default, `--compilation-cache DIR`, `--no-compilation-cache`). A checkpoint is written every
`--checkpoint-every` updates and at the end (stop checks stay every `log_every` updates, so the
cadence changes nothing in the result); `--resume` continues from the last one and ends with
exactly the parameters an uninterrupted run reaches (a replay buffer included): it refuses flags
that would change the result, naming each with the run's value and the one given (`--seed` and
`--target-return` default to the run's).
`--devices N` splits every rollout's environments over N devices (data parallel; `--num-envs`
a multiple of N). `--param NAME=VALUE` fixes an environment setting (`jaxsim.make`), `--param
NAME=LOW:HIGH` draws a params field uniformly every training episode (domain randomisation,
`jaxsim.uniform_params`); evaluation runs on the environment's params. config.json records
both (`env_overrides`, `uniform_params`), and `--resume` needs the same.
Writes to `--out`: checkpoint.msgpack, config.json, metrics.csv, metrics.jsonl, curve.png,
eval.json and episode.gif (watch it again: `python -m agents.play DIR`); an `--out` that holds
a run is refused unless `--resume` continues it or `--overwrite` replaces it. `--logger
tensorboard|wandb` (repeatable, or a comma list) logs the metrics rows there too
(`agents.loggers`: <out>/tensorboard, <out>/wandb). `--sweep NAME=V1,V2,...` (repeatable)
trains every combination of float hyperparameter values x `--seeds` in one program, a run
folder per configuration and a table of them (`agents.sweep_run`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh

import jaxsim
from agents import loggers, logs, play, run_setup, sweep_run
from agents.algorithms import ALGORITHMS, agent_type
from agents.checkpoint import sampler_ranges, save_checkpoint, sync_sidecar
from agents.loop import run_chunks
from agents.presets import config_for
from agents.train_args import (
    build_parser,
    check_flag,
    check_no_run,
    check_out,
    clear_run,
    config_overrides,
    setup_cache,
)
from atomicfiles import finite_json, remove_stale_temporaries, write_json_atomic
from jaxsim.profiler import check_output_dir


@dataclasses.dataclass
class _Run:
    """Everything checked before any work: what `_train` and `_finish` run with."""

    args: argparse.Namespace
    agent_cls: type
    agent: Any
    config: Any
    env: jaxsim.Env
    mesh: Mesh | None
    out: str
    ckpt_path: str
    ckpt: Any  # the checkpoint resumed from, or None
    target: float | None
    progress: logs.TrainingProgress
    command: str


def main(argv: list[str] | None = None) -> dict:
    """Runs the command; returns a summary (paths and final evaluation) for tests and scripts."""
    given = sys.argv[1:] if argv is None else argv
    from agents.decoupled.host_envs import env_argument, is_host_id

    if is_host_id(env_argument(given)):  # EnvPool, Gymnasium, MinAtar: actors + a learner
        from agents.decoupled.train import main as decoupled_main

        return decoupled_main(given)
    # The algorithm decides the config flags; an unknown one is reported by the ppo parser.
    parser = build_parser(given[0] if given and given[0] in ALGORITHMS else "ppo")
    args = parser.parse_args(argv)
    # Before anything starts JAX: XLA reads its CPU pool size once, then.
    note = jaxsim.size_cpu_pool(args.env)
    if note and not args.quiet:
        print(f"[{args.algorithm} {args.env}] {note}", flush=True)
    if args.sweep:  # configurations x seeds in one program, a run folder per configuration
        return sweep_run.main(parser, args, _command(argv))
    run = _prepare(parser, args, _command(argv))
    resumed = run.ckpt.meta if run.ckpt else None
    with loggers.open_loggers(args.loggers, run.out, _logged_config(run), resumed) as sink:
        runner, solved = _train(run, sink)
        summary = _finish(run, runner, solved)
        sink.log_evaluation(summary["eval"])
    return summary


def _prepare(parser: argparse.ArgumentParser, args: argparse.Namespace, command: str) -> _Run:
    """Checks everything that can be wrong with the input (parser.error: exit 2) before anything
    compiles; clears the old run with --overwrite."""
    agent_cls = agent_type(args.algorithm)
    run_setup.check_run_flags(parser, args)
    try:  # before anything compiles: a logger asked for whose library is missing
        loggers.check_installed(args.loggers)
    except ValueError as e:
        parser.error(str(e))
    mesh = None
    if args.devices is not None:
        devices = jax.devices()
        check_flag(
            parser,
            "--devices",
            args.devices,
            ge=1,
            le=len(devices),
            doc=f"jax.devices(): {devices}",
        )
        mesh = Mesh(np.array(jax.devices()[: args.devices]), (jaxsim.ENV_AXIS,))
    if args.profile is not None:
        try:
            check_output_dir(args.profile)
        except OSError as e:
            parser.error(f"--profile: {e}")
    cache_dir = setup_cache(parser, args)
    if not args.quiet:
        where = cache_dir or "off"
        print(f"[{args.algorithm} {args.env}] XLA compilation cache: {where}", flush=True)
    try:
        env, sampler = run_setup.make_env(parser, args.env, args.params)
        config = config_for(
            args.env, args.algorithm, **config_overrides(args, agent_cls.config_type)
        )
        out = args.out or os.path.join("runs", args.env)
        check_out(out)
        ckpt_path = os.path.join(out, "checkpoint.msgpack")
        ckpt = None
        if args.resume:
            ckpt = run_setup.load_for_resume(ckpt_path, args, env, config, sampler)
        else:
            check_no_run(out, args.overwrite)
        target = run_setup.run_target(args, ckpt)
        args.seed = (ckpt.meta.get("seed", 0) if ckpt else 0) if args.seed is None else args.seed
        rows = logs.read_metrics(out) if ckpt else []
        rows = [r for r in rows if ckpt and r["update"] <= ckpt.meta["update"]]
        progress = logs.TrainingProgress(
            args.seeds,
            config.num_updates,
            label=f"{args.algorithm} {args.env}",
            stream=None if args.quiet else sys.stdout,
            rows=rows,
            wall_offset=ckpt.meta.get("wall_time", 0.0) if ckpt else 0.0,
        )
        # No progress callback inside the jitted loop (that would keep it out of the cache):
        # rows come from each chunk's metrics (agents.loop.run_chunks).
        agent = agent_cls(config, env, mesh=mesh, params_sampler=sampler)
        run_setup.check_memory(agent, args.seeds, film=not args.no_plot)
    except (ValueError, TypeError, OSError) as e:
        parser.error(str(e))
    if args.overwrite:  # every check passed: only now is the old run given up
        clear_run(out)
    for stale in remove_stale_temporaries(out):
        print(f"removed {stale}, a temporary file of a run that was killed", file=sys.stderr)
    sync_sidecar(ckpt_path)
    return _Run(
        args, agent_cls, agent, config, env, mesh, out, ckpt_path, ckpt, target, progress, command
    )


def _train(run: _Run, sink: loggers.RunLoggers) -> tuple[Any, list[int | None]]:
    """The chunked loop with progress, checkpoints and stop checks -> (runner, solved_update);
    every metrics row also goes to `sink`, the --logger loggers."""
    args, config, ckpt, progress = run.args, run.config, run.ckpt, run.progress
    start = ckpt.meta["update"] if ckpt else 0
    if start < config.num_updates:  # the programs the first chunks call, compiled side by side
        first = min(config.log_every - start % config.log_every, config.num_updates - start)
        if args.checkpoint_every:
            first = min(first, args.checkpoint_every - start % args.checkpoint_every)
        later = (
            (config.log_every,) if start + first + config.log_every <= config.num_updates else ()
        )
        run.agent.precompile(args.seeds, (first, *later), evaluate=run.target is not None)
    if ckpt is not None:
        runner = ckpt.runner
    else:
        runner = run.agent.jit_init()(jax.random.split(jax.random.key(args.seed), args.seeds))
    solved = list(ckpt.meta.get("solved_update") or [None] * args.seeds) if ckpt else None

    def save(runner, solved) -> None:
        # Metrics first: rows past the checkpoint that a crash leaves behind are dropped on resume.
        logs.write_metrics(run.out, progress.rows)
        extra = {
            "wall_time": progress.wall_time(),
            "command": run.command,
            "seed": args.seed,
            "target_return": run.target,
            "solved_update": solved,
            "devices": args.devices,
            **sink.meta(),  # the W&B run id, which --resume continues
        }
        sampler = run.agent.params_sampler
        save_checkpoint(run.ckpt_path, runner, config, run.env, args.seeds, extra, sampler)

    def on_chunk(report) -> None:
        # Rows every log_every updates and at the end, whatever the checkpoints cut chunks at.
        if report.done % config.log_every == 0 or report.done == config.num_updates:
            row = progress.report_chunk(
                report.done,
                report.done * config.steps_per_update,
                report.metrics,
                report.eval_returns,
                sum(u is not None for u in report.solved_update),
                confirm_returns=report.confirm_returns,
            )
            sink.log_row(row)
        if args.checkpoint_every and report.done % args.checkpoint_every == 0:
            save(report.runner, report.solved_update)

    start = int(np.max(np.asarray(runner.update)))
    runner, solved = run_chunks(
        run.agent,
        runner,
        config.num_updates,
        chunk=config.log_every,
        seed=args.seed,
        target=run.target,
        solved_update=solved,
        boundary=args.checkpoint_every or None,
        on_chunk=on_chunk,
    )
    done = int(np.max(np.asarray(runner.update)))
    if done > start and not (args.checkpoint_every and done % args.checkpoint_every == 0):
        save(runner, solved)
    return runner, solved


def _finish(run: _Run, runner, solved: list[int | None]) -> dict:
    """The final evaluation (eval.json), curve, GIF, profile and summary line."""
    args, config, out, target = run.args, run.config, run.out, run.target
    done = int(np.max(np.asarray(runner.update)))
    # The independent evaluation that confirmed every solved seed: for a solved (frozen) seed
    # these are the very returns that confirmed it, so eval.json and the stop agree.
    returns = play.evaluate(run.agent, runner, args.seed, args.seeds)
    per_seed = returns.mean(axis=1)
    solved_flags = [u is not None for u in solved] if target is not None else None
    evaluation = run_setup.evaluation_summary(
        args.env, config, returns, done, target, solved, run.progress.wall_time()
    )
    write_json_atomic(os.path.join(out, "eval.json"), finite_json(evaluation))
    curve = None
    if not args.no_plot and run.progress.rows:
        title = f"{args.algorithm.upper()} on {args.env}, {args.seeds} seed(s)"
        curve = logs.plot_curve(run.progress.rows, os.path.join(out, "curve.png"), title)
    gif = None
    if not args.no_plot:  # `python -m agents.play OUT` plays it again
        gif = play.try_film_episode(
            run.agent, runner, args.seed, args.seeds, os.path.join(out, "episode.gif")
        )
    stop = ""
    if target is not None:
        stop = (
            f", {sum(solved_flags)}/{args.seeds} solved (stop check and this evaluation both "
            f">= {target:g})"
        )
    print(
        f"[{args.algorithm} {args.env}] evaluation (deterministic, {returns.shape[1]} episodes "
        f"per seed): {per_seed.mean():.1f} ± {per_seed.std():.1f} over {args.seeds} seed(s){stop}; "
        f"outputs in {out}"
    )
    profile_report = None
    if args.profile is not None:
        # A copy of the agent without the progress callback: profiling adds no metrics rows.
        sampler = run.agent.params_sampler
        agent = run.agent_cls(config, run.env, mesh=run.mesh, params_sampler=sampler)
        run_one = agent.jit_run(1)
        profile_report = jaxsim.profile(
            lambda: run_one(runner), out_dir=args.profile, name=f"{args.algorithm}_{args.env}"
        )
        print(profile_report.format_table())
    summary = {
        "out": out,
        "checkpoint": run.ckpt_path,
        "curve": curve,
        "gif": gif,
        "eval": evaluation,
        "profile": profile_report,
    }
    diverged = logs.first_nonfinite(run.progress.rows)
    if diverged is not None or not np.isfinite(per_seed).all():
        update, metric = diverged or (done, "evaluation return")
        print(
            f"[{args.algorithm} {args.env}] error: the run diverged: {metric} is not finite from "
            f"update {update} on (outputs in {out}, non-finite values written as null)",
            file=sys.stderr,
        )
        raise SystemExit(1)
    return summary


def _logged_config(run: _Run) -> dict[str, Any]:
    """The run's config as the --logger loggers record it (W&B config, TensorBoard text): the
    algorithm's config and the command's settings, named as in config.json."""
    args = run.args
    return finite_json(
        {
            "algorithm": args.algorithm,
            "env_id": args.env,
            "env_overrides": run.env.make_kwargs(),
            "uniform_params": sampler_ranges(run.agent.params_sampler),
            "num_seeds": args.seeds,
            "seed": args.seed,
            "target_return": run.target,
            "devices": args.devices,
            "command": run.command,
            "config": run.config.to_dict(),
        }
    )


def _command(argv: list[str] | None) -> str:
    return " ".join(["python -m agents.train", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
