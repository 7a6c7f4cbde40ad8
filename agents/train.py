"""Command line: `python -m agents.train ppo|dqn|sac --env CartPole-v1 --seeds 4 --out DIR`.

Every field of the algorithm's config (`PPOConfig`, `DQNConfig`, `SACConfig`) is a flag
(`--total-steps`, `--num-envs`, `--no-anneal-lr`, `--hidden 64,64`, ...; see `python -m
agents.train ALGORITHM --help`), on top of the environment's preset (`agents/presets.py`).
Seeds train at once as `jit(vmap(run))`, in chunks of `log_every` updates (`agents.loop`): a
progress line after each, and with a target return (the preset's, `--target-return`) a
deterministic evaluation that freezes every seed at the target and ends the run once all are.
The loop holds no host callback, so JAX's persistent compilation cache keeps it (on by
default, `--compilation-cache DIR`, `--no-compilation-cache`). A checkpoint is written every
`--checkpoint-every` updates and at the end; `--resume` continues from the last one and ends
with exactly the parameters an uninterrupted run reaches (a replay buffer included).
`--devices N` splits every rollout's environments over N devices (data parallel; `--num-envs`
a multiple of N).
Writes to `--out`: checkpoint.msgpack, config.json, metrics.csv, metrics.jsonl, curve.png,
eval.json and episode.gif (watch it again: `python -m agents.play DIR`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import typing

import jax
import numpy as np
from jax.sharding import Mesh

import jaxsim
from agents import logs, play
from agents.algorithms import ALGORITHMS, agent_type
from agents.checkpoint import load_checkpoint, save_checkpoint, sync_sidecar
from agents.config import field_help
from agents.loop import run_chunks
from agents.presets import config_for, target_for
from jaxsim import compile_cache
from jaxsim.files import finite_json, remove_stale_temporaries, write_json_atomic
from jaxsim.profiler import check_output_dir


def _int_tuple(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected integers separated by commas, got {text!r}"
        ) from None


_NO_TARGET = "none"


def _target(text: str) -> float | str:
    if text.strip().lower() == _NO_TARGET:
        return _NO_TARGET
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a return (a number) or 'none', got {text!r}"
        ) from None
    if not np.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite return, got {text!r}")
    return value


def build_parser(algorithm: str = "ppo") -> argparse.ArgumentParser:
    """The command's parser, with the config flags of `algorithm`."""
    parser = argparse.ArgumentParser(
        prog="python -m agents.train",
        description="Train an agent on a jaxsim environment, many seeds in one jit.",
    )
    parser.add_argument("algorithm", choices=ALGORITHMS)
    parser.add_argument("--env", default="CartPole-v1", help="a jaxsim environment id")
    parser.add_argument("--seeds", type=int, default=1, help="seeds trained at once (vmap)")
    parser.add_argument("--seed", type=int, default=0, help="base PRNG seed")
    parser.add_argument("--out", default=None, help="output folder (default runs/<env>)")
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=0,
        help="updates between checkpoints (0: only at the end)",
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue from <out>/checkpoint.msgpack"
    )
    parser.add_argument(
        "--devices",
        type=int,
        default=None,
        help="split the environments of every rollout over this many devices (the first N of "
        "jax.devices(), mesh axis jaxsim.ENV_AXIS); --num-envs must be a multiple of N",
    )
    parser.add_argument(
        "--target-return",
        type=_target,
        default=None,
        help="stop a seed once its deterministic evaluation (eval_envs episodes, checked every "
        "log_every updates) reaches this mean return, and the run once every seed has; 'none' "
        "trains the whole budget (default: the preset's target, agents.presets.TARGETS)",
    )
    parser.add_argument(
        "--compilation-cache",
        metavar="DIR",
        default=None,
        help="JAX's persistent compilation cache folder: later runs load the compiled loop "
        f"instead of compiling it (default: ${compile_cache.ENV_VAR}, else ~/.cache/jaxsim/xla)",
    )
    parser.add_argument(
        "--no-compilation-cache", action="store_true", help="compile everything afresh"
    )
    parser.add_argument("--no-plot", action="store_true", help="skip curve.png and episode.gif")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument(
        "--profile",
        metavar="DIR",
        default=None,
        help="after training, profile one update with jaxsim.profile: a per-phase table and "
        "DIR/<algorithm>_<env>.{json,png,trace.json.gz} (open the trace in ui.perfetto.dev)",
    )
    config_type = agent_type(algorithm).config_type
    add_config_flags(parser, config_type, "(defaults: the environment's preset)")
    return parser


def add_config_flags(parser: argparse.ArgumentParser, config_cls: type, note: str = "") -> None:
    """One flag per field of the dataclass `config_cls`, `--field-name`, in a group of its own.

    The flag's text is the field's help (`agents.config.config_field`) and its default; its type
    follows the field's annotation: bool -> `--x` / `--no-x`, tuple[int, ...] -> "64,64", else
    int, float or str. Flags default to None, meaning "not given" (see `config_overrides`).
    """
    group = parser.add_argument_group(f"{config_cls.__name__} {note}".strip())
    types = typing.get_type_hints(config_cls)
    for field in dataclasses.fields(config_cls):
        flag = "--" + field.name.replace("_", "-")
        help_text = f"{field_help(field)} ({config_cls.__name__} default: {field.default!r})"
        kind = types[field.name]
        if kind is bool:
            group.add_argument(
                flag, action=argparse.BooleanOptionalAction, default=None, help=help_text
            )
        elif kind == tuple[int, ...]:
            group.add_argument(flag, type=_int_tuple, default=None, help=help_text)
        elif kind in (int, float, str):
            group.add_argument(flag, type=kind, default=None, help=help_text)
        else:
            raise TypeError(f"{config_cls.__name__}.{field.name}: no flag for type {kind}")


def config_overrides(args: argparse.Namespace, config_cls: type) -> dict:
    """The `config_cls` fields given on the command line: {name: value}."""
    names = (f.name for f in dataclasses.fields(config_cls))
    return {n: getattr(args, n) for n in names if getattr(args, n) is not None}


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
    agent_cls = agent_type(args.algorithm)
    config_type = agent_cls.config_type
    # Everything that can be wrong with the input fails here, before anything compiles.
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    if args.checkpoint_every < 0:
        parser.error(f"--checkpoint-every must be >= 0, got {args.checkpoint_every}")
    mesh = None
    if args.devices is not None:
        if not 1 <= args.devices <= jax.device_count():
            parser.error(
                f"--devices must be in [1, {jax.device_count()}] (jax.device_count() on this "
                f"machine: {jax.devices()}), got {args.devices}"
            )
        mesh = Mesh(np.array(jax.devices()[: args.devices]), (jaxsim.ENV_AXIS,))
    if args.profile is not None:
        try:
            check_output_dir(args.profile)
        except OSError as e:
            parser.error(f"--profile: {e}")
    try:
        cache_dir = None
        if not args.no_compilation_cache:
            cache_dir = compile_cache.enable(args.compilation_cache)
        else:
            compile_cache.disable()
    except ValueError as e:
        parser.error(f"--compilation-cache: {e}")
    if not args.quiet:
        where = cache_dir or "off"
        print(f"[{args.algorithm} {args.env}] XLA compilation cache: {where}", flush=True)
    target = args.target_return
    if target is None:
        target = target_for(args.env, args.algorithm)
    elif target == _NO_TARGET:
        target = None
    try:
        env = jaxsim.make(args.env)
        config = config_for(args.env, args.algorithm, **config_overrides(args, config_type))
        out = args.out or os.path.join("runs", args.env)
        _check_out(out)
        ckpt_path = os.path.join(out, "checkpoint.msgpack")
        ckpt = None
        if args.resume:
            if not os.path.exists(ckpt_path):
                raise ValueError(f"--resume: no checkpoint at {ckpt_path}")
            ckpt = load_checkpoint(ckpt_path)
            if ckpt.meta["algorithm"] != args.algorithm:
                raise ValueError(
                    f"--resume: {ckpt_path} is a {ckpt.meta['algorithm']} run, not "
                    f"{args.algorithm}; pass the same algorithm, or a new --out"
                )
            _check_same_env(ckpt_path, ckpt.env, env)
            if ckpt.config != config or ckpt.meta["num_seeds"] != args.seeds:
                raise ValueError(
                    f"--resume: {ckpt_path} was written with --seeds {ckpt.meta['num_seeds']} and "
                    f"config {ckpt.config}; pass the same flags to resume it"
                )
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
        agent = agent_cls(config, env, mesh=mesh)
    except (ValueError, TypeError, OSError) as e:
        parser.error(str(e))
    for stale in remove_stale_temporaries(out):
        print(f"removed {stale}, a temporary file of a run that was killed", file=sys.stderr)
    sync_sidecar(ckpt_path)

    key = jax.random.key(args.seed)
    if ckpt is not None:
        runner = ckpt.runner
    else:
        runner = agent.jit_init()(jax.random.split(key, args.seeds))
    solved = list(ckpt.meta.get("solved_update") or [None] * args.seeds) if ckpt else None

    def save(runner, solved) -> None:
        # Metrics first: rows past the checkpoint that a crash leaves behind are dropped on resume.
        logs.write_metrics(out, progress.rows)
        extra = {
            "wall_time": progress.wall_time(),
            "command": _command(argv),
            "seed": args.seed,
            "target_return": target,
            "solved_update": solved,
        }
        save_checkpoint(ckpt_path, runner, config, env, args.seeds, extra)

    def on_chunk(report) -> None:
        solved_now = sum(u is not None for u in report.solved_update)
        steps = report.done * config.steps_per_update
        progress.report_chunk(report.done, steps, report.metrics, report.eval_returns, solved_now)
        if args.checkpoint_every and report.done % args.checkpoint_every == 0:
            save(report.runner, report.solved_update)

    start = int(np.max(np.asarray(runner.update)))
    runner, solved = run_chunks(
        agent,
        runner,
        config.num_updates,
        chunk=config.log_every,
        seed=args.seed,
        target=target,
        solved_update=solved,
        boundary=args.checkpoint_every or None,
        on_chunk=on_chunk,
    )
    done = int(np.max(np.asarray(runner.update)))
    if done > start and not (args.checkpoint_every and done % args.checkpoint_every == 0):
        save(runner, solved)
    returns = play.evaluate(agent, runner, args.seed, args.seeds)
    per_seed = returns.mean(axis=1)
    evaluation = {
        "env": args.env,
        "deterministic": True,
        "episodes_per_seed": config.eval_envs,
        "mean_return": float(per_seed.mean()),
        "std_return_over_seeds": float(per_seed.std()),
        "per_seed_mean_return": per_seed.tolist(),
        "steps_per_seed": done * config.steps_per_update,
        "target_return": target,
        # Per seed, the env steps at which a stop check first found it solved (None: never).
        "steps_to_target_per_seed": [
            None if u is None else u * config.steps_per_update for u in solved
        ],
        "wall_time": progress.wall_time(),
    }
    write_json_atomic(os.path.join(out, "eval.json"), finite_json(evaluation))
    curve = None
    if not args.no_plot and progress.rows:
        title = f"{args.algorithm.upper()} on {args.env}, {args.seeds} seed(s)"
        curve = logs.plot_curve(progress.rows, os.path.join(out, "curve.png"), title)
    gif = None
    if not args.no_plot:  # `python -m agents.play OUT` plays it again
        gif = play.try_film_episode(
            agent, runner, args.seed, args.seeds, os.path.join(out, "episode.gif")
        )
    stop = ""
    if target is not None:
        reached = [u for u in solved if u is not None]
        stop = f", {len(reached)}/{args.seeds} reached {target:g} in the stop checks"
    print(
        f"[{args.algorithm} {args.env}] evaluation (deterministic, {config.eval_envs} episodes "
        f"per seed): {per_seed.mean():.1f} ± {per_seed.std():.1f} over {args.seeds} seed(s){stop}; "
        f"outputs in {out}"
    )
    profile_report = None
    if args.profile is not None:
        # A copy of the agent without the progress callback: profiling adds no metrics rows.
        run_one = agent_cls(config, env, mesh=mesh).jit_run(1)
        profile_report = jaxsim.profile(
            lambda: run_one(runner), out_dir=args.profile, name=f"{args.algorithm}_{args.env}"
        )
        print(profile_report.format_table())
    summary = {
        "out": out,
        "checkpoint": ckpt_path,
        "curve": curve,
        "gif": gif,
        "eval": evaluation,
        "profile": profile_report,
    }
    diverged = logs.first_nonfinite(progress.rows)
    if diverged is not None or not np.isfinite(per_seed).all():
        update, metric = diverged or (done, "evaluation return")
        print(
            f"[{args.algorithm} {args.env}] error: the run diverged: {metric} is not finite from "
            f"update {update} on (outputs in {out}, non-finite values written as null)",
            file=sys.stderr,
        )
        raise SystemExit(1)
    return summary


def _check_out(out: str) -> None:
    """--out must be a folder this process can write: checked before anything compiles."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"--out: {out} exists and is not a folder")
    try:
        os.makedirs(out, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write-check."):
            pass
    except OSError as e:
        raise ValueError(f"--out: cannot write to {out} ({e.strerror or e})") from None


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
        "the same --env, or a new --out"
    )


def _command(argv: list[str] | None) -> str:
    return " ".join(["python -m agents.train", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
