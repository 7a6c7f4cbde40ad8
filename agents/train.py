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
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

import jaxsim
from agents import loggers, logs, play
from agents.algorithms import ALGORITHMS, agent_type
from agents.checkpoint import load_checkpoint, sampler_ranges, save_checkpoint, sync_sidecar
from agents.loop import run_chunks
from agents.presets import config_for, env_overrides_for, target_for
from agents.train_args import (
    NO_TARGET,
    ParamFlag,
    build_parser,
    check_flag,
    check_no_run,
    check_out,
    check_seed_flag,
    clear_run,
    config_overrides,
    refuse_resume,
    resume_changes,
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
        from agents.sweep_run import main as sweep_main

        return sweep_main(parser, args, _command(argv))
    run = _prepare(parser, args, _command(argv))
    resumed = run.ckpt.meta if run.ckpt else None
    with loggers.open_loggers(args.loggers, run.out, _logged_config(run), resumed) as sink:
        runner, solved = _train(run, sink)
        summary = _finish(run, runner, solved)
        sink.log_evaluation(summary["eval"])
    return summary


def check_run_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The flags every training command checks first (a run or a sweep): parser.error, exit 2."""
    check_flag(parser, "--seeds", args.seeds, ge=1)
    check_flag(parser, "--checkpoint-every", args.checkpoint_every, ge=0)
    if args.seed is not None:
        check_seed_flag(parser, args.seed)
    if args.resume and args.overwrite:
        parser.error("--resume continues the run in --out, --overwrite replaces it: pass one")


def _prepare(parser: argparse.ArgumentParser, args: argparse.Namespace, command: str) -> _Run:
    """Checks everything that can be wrong with the input (parser.error: exit 2) before anything
    compiles; clears the old run with --overwrite."""
    agent_cls = agent_type(args.algorithm)
    check_run_flags(parser, args)
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
        env, sampler = _make_env(parser, args.env, args.params)
        config = config_for(
            args.env, args.algorithm, **config_overrides(args, agent_cls.config_type)
        )
        out = args.out or os.path.join("runs", args.env)
        check_out(out)
        ckpt_path = os.path.join(out, "checkpoint.msgpack")
        ckpt = None
        if args.resume:
            ckpt = _load_for_resume(ckpt_path, args, env, config, sampler)
        else:
            check_no_run(out, args.overwrite)
        target = _target(args, ckpt)
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
        _check_memory(agent, args.seeds, film=not args.no_plot)
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


def _make_env(
    parser: argparse.ArgumentParser, env_id: str, flags: list[ParamFlag]
) -> tuple[jaxsim.Env, jaxsim.UniformParams | None]:
    """The run's environment (the preset's overrides, then the fixed `--param`s) and the
    sampler of the `--param` ranges; parser.error (exit 2) naming the flag that is wrong."""
    seen: dict[str, str] = {}
    for flag in flags:
        if flag.name in seen:
            parser.error(
                f"--param {flag.text}: {flag.name} is given twice (--param {seen[flag.name]})"
            )
        seen[flag.name] = flag.text
    base = env_overrides_for(env_id)
    fixed = [f for f in flags if not f.is_range]
    try:
        env = jaxsim.make(env_id, **{**base, **{f.name: f.value for f in fixed}})
    except (ValueError, TypeError) as e:
        if not fixed:
            raise
        jaxsim.make(env_id, **base)  # raises (and is reported) if the --env is what is wrong
        for flag in fixed:  # else the first --param that jaxsim.make refuses, by name
            refusal = _refusal(env_id, {**base, flag.name: flag.value})
            if refusal:
                parser.error(f"--param {flag.text}: {refusal}")
        parser.error(f"--param {' --param '.join(f.text for f in fixed)}: {e}")  # together
    ranges = {f.name: (f.low, f.high) for f in flags if f.is_range}
    for name, bounds in ranges.items():  # each alone first, so the error names its flag
        try:
            jaxsim.uniform_params(env, **{name: bounds})
        except (ValueError, TypeError) as e:
            parser.error(f"--param {seen[name]}: {e}")
    return env, jaxsim.uniform_params(env, **ranges) if ranges else None


def _refusal(env_id: str, overrides: dict) -> str | None:
    """What `jaxsim.make(env_id, **overrides)` objects to, or None."""
    try:
        jaxsim.make(env_id, **overrides)
    except (ValueError, TypeError) as e:
        return str(e)
    return None


def _check_memory(agent, num_seeds: int, film: bool) -> None:
    """A ValueError naming --num-envs or --eval-envs, with how many fit, where the run's
    rollouts would not fit in free memory: the training rollouts of every seed at once, the
    evaluations (`agent.evaluate`, every seed at once) and the filmed one (`play.film_episode`).
    The estimate is `jaxsim.rollout`'s own (`jaxsim.check_rollout`), made before any
    work; on a mesh, per device."""
    c, env = agent.config, agent.env
    devices = agent.mesh.shape[jaxsim.ENV_AXIS] if agent.mesh is not None else 1
    policy = _stand_in_policy(agent)
    train, evaluate = (c.num_steps, agent.env_params), (agent.eval_steps, agent.eval_params)
    evaluated = ("terminated", "truncated", "episode_return")  # what Agent.evaluate keeps
    # (flag, its value, seeds at once, (steps, params), outputs kept)
    rollouts = [
        ("--num-envs", c.num_envs, num_seeds, train, "all"),
        ("--eval-envs", c.eval_envs, num_seeds, evaluate, evaluated),
    ]
    if film:
        rollouts.append(("--eval-envs", c.eval_envs, 1, evaluate, "all"))
    for flag, asked, seeds, (steps, params), outputs in rollouts:
        training = flag == "--num-envs"

        def fits(n: int, seeds=seeds, steps=steps, params=params, outputs=outputs, given=training):
            envs = max(1, n * seeds // devices)
            try:
                jaxsim.check_rollout(
                    env, policy, steps, num_envs=envs, params=params, outputs=outputs,
                    state_given=given,
                )  # fmt: skip
            except MemoryError:
                return False
            return True

        if fits(asked):
            continue
        low, high = 0, asked  # fits(low) (or low is 0), not fits(high)
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if fits(mid) else (low, mid)
        platform = jax.devices()[0].platform
        if not low and not training:  # the time limit is what does not fit
            raise ValueError(
                f"{env.id}'s time limit, {steps} steps (evaluation runs every episode to its "
                f"end): an evaluation rollout of even one environment does not fit in the memory "
                f"{platform} has free; pass --param max_episode_steps=N"
            )
        length = f"--num-steps {steps}" if training else f"{env.id}'s longest episode, {steps}"
        fit = f"at most {low} fit ({flag} {low} or less)" if low else "fewer --num-steps"
        raise ValueError(
            f"{flag} {asked}: the {'training' if training else 'evaluation'} rollouts "
            f"({length} steps of {asked} environments, x {seeds} seed(s) at once"
            f"{', split over the devices' if devices > 1 else ''}) do not fit in the memory "
            f"{platform} has free: {fit}"
        )


def _stand_in_policy(agent):
    """A policy with the agent's acting policy's outputs (action and extras, their shapes and
    dtypes), traced at once for any batch: what the memory estimate looks at."""
    space = agent.env.observation_space(agent.env.default_params)
    obs = jax.ShapeDtypeStruct((1, *space.shape), space.dtype)
    out = jax.eval_shape(lambda k, o: agent.policy(agent.init(k))(k, o), jax.random.key(0), obs)

    def policy(key, obs):
        def batch(x):
            return jnp.zeros((obs.shape[0], *x.shape[1:]), x.dtype)

        return jax.tree.map(batch, out)

    return policy


def _target(args: argparse.Namespace, ckpt) -> float | None:
    """The run's target return: --target-return, else the resumed run's, else the preset's."""
    if args.target_return == NO_TARGET:
        return None
    if args.target_return is not None:
        return args.target_return
    if ckpt is not None and "target_return" in ckpt.meta:
        return ckpt.meta["target_return"]
    return target_for(args.env, args.algorithm)


def _load_for_resume(ckpt_path: str, args: argparse.Namespace, env: jaxsim.Env, config, sampler):
    """The checkpoint --resume continues; a ValueError naming every flag that would change its
    result (each with the run's value and the one given) if it is not a run of these flags.
    --seed and --target-return default to the run's; --checkpoint-every changes nothing."""
    if not os.path.exists(ckpt_path):
        raise ValueError(f"--resume: no checkpoint at {ckpt_path}")
    ckpt = load_checkpoint(ckpt_path)
    if ckpt.meta["algorithm"] != args.algorithm:
        raise ValueError(
            f"--resume: {ckpt_path} is a {ckpt.meta['algorithm']} run, not "
            f"{args.algorithm}; pass the same algorithm, or a new --out"
        )
    _check_same_env(ckpt_path, ckpt.env, env)
    changes = []
    ranges, asked_ranges = ckpt.meta.get("uniform_params"), sampler_ranges(sampler)
    if ranges != asked_ranges:
        changes.append(
            f"the --param ranges {_ranges_text(ranges)}, not {_ranges_text(asked_ranges)}"
        )
    saved = {"seeds": ckpt.meta["num_seeds"], **ckpt.config.to_dict()}
    asked = {"seeds": args.seeds, **config.to_dict()}
    if "devices" in ckpt.meta:  # a mesh changes float rounding
        saved["devices"], asked["devices"] = ckpt.meta["devices"], args.devices
    if args.target_return is not None and "target_return" in ckpt.meta:
        target = ckpt.meta["target_return"]
        saved["target_return"] = NO_TARGET if target is None else target
        asked["target_return"] = args.target_return
    changes += resume_changes(saved, asked)
    saved_seed = ckpt.meta.get("seed", 0)  # runs before the seed was recorded used 0
    if args.seed is not None and args.seed != saved_seed:
        changes.append(
            f"--seed {saved_seed}, not --seed {args.seed} (pass --seed {saved_seed}, or no --seed)"
        )
    refuse_resume(ckpt_path, changes)
    return ckpt


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
    evaluation = evaluation_summary(
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


def evaluation_summary(
    env_id: str,
    config,
    returns: np.ndarray,
    done: int,
    target: float | None,
    solved: list[int | None],
    wall_time: float,
) -> dict[str, Any]:
    """eval.json of a run: the final evaluation's `returns` [num_seeds, episodes] after `done`
    updates, with each seed's solved flag and steps to `target` (None: no target, or never)."""
    per_seed = returns.mean(axis=1)
    return {
        "env": env_id,
        "deterministic": True,
        "episodes_per_seed": int(returns.shape[1]),
        "mean_return": float(per_seed.mean()),
        "std_return_over_seeds": float(per_seed.std()),
        "per_seed_mean_return": per_seed.tolist(),
        "steps_per_seed": done * config.steps_per_update,
        "target_return": target,
        # Per seed: solved means its stop check and the independent evaluation (these episodes,
        # keys apart from the stop check's) both reached the target (agents.loop.confirmed).
        "solved_per_seed": [u is not None for u in solved] if target is not None else None,
        # Per seed, the env steps at which it was solved (None: never).
        "steps_to_target_per_seed": [
            None if u is None else u * config.steps_per_update for u in solved
        ],
        "wall_time": wall_time,
    }


def _check_same_env(path: str, saved: jaxsim.Env, asked: jaxsim.Env) -> None:
    """--resume continues the same environment (id, static config and params overrides)."""
    if saved == asked:
        return
    was, now = saved.make_kwargs(), asked.make_kwargs()
    diffs = [] if saved.id == asked.id else [f"env {saved.id} -> {asked.id}"]
    diffs += [
        f"{k}: {was.get(k)} -> {now.get(k)}" for k in sorted(was | now) if was.get(k) != now.get(k)
    ]
    raise ValueError(
        f"--resume: {path} was trained on {saved!r}, not {asked!r} ({'; '.join(diffs)}); pass "
        "the same --env and --param NAME=VALUE flags, or a new --out"
    )


def _ranges_text(ranges: dict | None) -> str:
    if not ranges:
        return "(none)"
    return " ".join(f"{name}={low}:{high}" for name, (low, high) in ranges.items())


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
