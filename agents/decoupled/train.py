"""`python -m agents.train ppo --env gymnasium/CartPole-v1 ...`: PPO on a host simulator.

`agents.train` hands host ids (`gymnasium/<id>`, `envpool/<task>`, `MinAtar/<Game>-v0`) here.
Every PPOConfig field is a flag, over the preset of the same task (`CartPole-v1`, and
`gymnax/Breakout-MinAtar` for MinAtar Breakout). With a target return (the task's,
`agents.presets.TARGETS`, or `--target-return`) every `log_every` updates end with a stop check
as `agents.train`'s: a deterministic evaluation of `eval_envs` episodes on a fresh pool; one at
the target is confirmed by an independent evaluation (>= 32 episodes, environments seeded apart:
the final evaluation's) and the run stops there (`agents.loop.confirmed`), or trains on.
The compilation cache is on as in `agents.train` (`--compilation-cache DIR`,
`--no-compilation-cache`). Writes to `--out`: checkpoint.msgpack +
config.json (the learner's state: `--resume` continues it; host environments cannot be saved,
so a resumed run starts fresh episodes), metrics.csv / .jsonl, curve.png, eval.json, and with
`--profile DIR` DIR/decoupled_profile.json (per thread: acting, waiting, learning). Ctrl-C and
SIGTERM stop after the update in flight, write a consistent checkpoint and exit 130 / 143.
`--resume` refuses, before any work, flags that would change the run (each named with the run's
value and the one given, as `agents.train`'s; `--target-return` defaults to the run's), other
`--seeds`, and a folder with no checkpoint; a run its `--time-budget` stopped trains on.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import sys

import jax
import numpy as np

from agents import logs
from agents.decoupled.args import build_parser, decoupled_config, preset_id, task_target
from agents.decoupled.evaluation import HostEvaluator, check_seed, evaluation_seed
from agents.decoupled.host_envs import MissingDependency, make_pool
from agents.decoupled.learner import HostPPO, import_rlax, load_state, read_meta, save_state
from agents.decoupled.run import DecoupledConfig, format_profile, run_decoupled
from agents.loop import MIN_EPISODES, confirmed
from agents.ppo import PPOConfig
from agents.presets import config_for
from agents.structs import Metrics
from agents.train_args import (
    NO_TARGET,
    SEED_MAX,
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
from atomicfiles import finite_json, write_json_atomic


def _metrics(update: int, report, last: dict) -> Metrics:
    """A one-seed Metrics row of `report` (`last`: the latest return and episodes since the
    previous row); resets the episode count."""
    one = np.ones(1, np.float32)
    metrics = Metrics(
        update=np.array([update]),
        steps=np.array([report.env_steps]),
        mean_return=last["return"] * one,
        episodes=last["episodes"] * one,
        loss=jax.tree.map(lambda x: np.float32(x) * one, report.loss),
    )
    last["episodes"] = 0
    return metrics


@dataclasses.dataclass
class _Shared:
    """What every seed of a run shares: checked flags, the learner (its programs compile once
    for all seeds) and the evaluator."""

    args: argparse.Namespace
    config: PPOConfig
    dc: DecoupledConfig
    learner: HostPPO
    evaluator: HostEvaluator
    target: float | None


CHECKPOINT = "checkpoint.msgpack"


def seed_folder(out: str, seeds: int, k: int) -> str:
    """Where seed number k of a run writes: `out` itself for one seed, `out/seed<k>` for more."""
    return out if seeds == 1 else os.path.join(out, f"seed{k}")


def main(argv: list[str] | None = None) -> dict:
    """Runs the command; returns a summary (paths, evaluation, profile) for tests and scripts.

    `--seeds N` trains seeds `--seed`, `--seed` + 1, ... one after another in this process (the
    programs compile once), each a whole run of its own in `<out>/seed<k>` (`--resume` continues
    the unfinished ones); `<out>/eval.json` gathers their evaluations per seed."""

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.algorithm != "ppo":
        parser.error(f"the decoupled mode (--env {args.env}) runs ppo, not {args.algorithm!r}")
    check_flag(parser, "--seeds", args.seeds, ge=1)
    check_flag(parser, "--checkpoint-every", args.checkpoint_every, ge=0)
    if args.time_budget is not None:
        check_flag(parser, "--time-budget", args.time_budget, float, gt=0)
    # Seeds --seed ... --seed + seeds - 1 key JAX (64 bits) and seed the host pools (>= 0).
    check_seed_flag(parser, args.seed, 0, SEED_MAX - (args.seeds - 1))
    if args.schedule == "free":  # V-trace needs rlax: said before any work
        try:
            import_rlax()
        except ImportError as e:
            parser.error(f"--schedule free: {e}")
    try:
        config = config_for(preset_id(args.env), "ppo", **config_overrides(args, PPOConfig))
        dc = decoupled_config(args)
        dc.check(config)
        out = args.out or os.path.join("runs", args.env.replace("/", "_"))
        check_out(out)
        if args.resume and args.overwrite:
            raise ValueError("--resume continues the run in --out, --overwrite replaces it")
        outs = [seed_folder(out, args.seeds, k) for k in range(args.seeds)]
        resumed = {}
        if args.resume:
            resumed = _check_resume(args, config, out, outs)
        else:
            for folder in dict.fromkeys([out, *outs]):
                check_no_run(folder, args.overwrite)
        target = _target(args, resumed)
        if args.profile is not None:
            check_out(args.profile)
        probe = make_pool(args.env, 1, args.seed)  # the spaces; fails early on a missing extra
        spaces, max_steps = (probe.observation_space, probe.action_space), probe.max_episode_steps
        probe.close()
    except (ValueError, TypeError, MissingDependency) as e:
        parser.error(str(e))
    cache_dir = setup_cache(parser, args)  # before the learner's first compile
    if not args.quiet:
        print(f"[ppo {args.env}] XLA compilation cache: {cache_dir or 'off'}", flush=True)
    try:  # the network for these spaces (a CNN needs image observations)
        learner = HostPPO(config, *spaces, args.env, vtrace=args.schedule == "free")
    except ValueError as e:
        parser.error(str(e))
    if args.overwrite:  # every check passed: only now is the old run given up
        for folder in dict.fromkeys([out, *outs]):
            clear_run(folder)
    run = _Shared(args, config, dc, learner, HostEvaluator(learner, args.env, max_steps or 27_000),
               target)  # fmt: skip
    summaries = []
    for k, folder in enumerate(outs):
        os.makedirs(folder, exist_ok=True)
        summaries.append(_train_seed(parser, run, args.seed + k, folder))
    if args.seeds == 1:
        return summaries[0]
    evaluation = _gather(run, [s["eval"] for s in summaries])
    write_json_atomic(os.path.join(out, "eval.json"), finite_json(evaluation))
    solved = evaluation["solved_per_seed"]
    print(
        f"[ppo {args.env} {dc.schedule}] {args.seeds} seeds: evaluation "
        f"{evaluation['mean_return']:.1f} ± {evaluation['std_return_over_seeds']:.1f}"
        + ("" if solved is None else f", {sum(solved)}/{args.seeds} solved")
        + f"; outputs in {out}"
    )
    return {"out": out, "eval": evaluation, "seeds": summaries}


def _target(args: argparse.Namespace, resumed: dict[str, dict]) -> float | None:
    """--target-return, else the resumed run's, else the task's preset target."""
    if args.target_return == NO_TARGET:
        return None
    if args.target_return is not None:
        return args.target_return
    for meta in resumed.values():
        if "target_return" in meta:
            return meta["target_return"]
    return task_target(args.env)


def _check_resume(args: argparse.Namespace, config: PPOConfig, out: str, outs: list[str]):
    """The metadata of each seed's checkpoint --resume continues, by folder; a ValueError if
    there is none, or naming every flag that would change the run (as `agents.train`'s)."""
    single = os.path.join(out, CHECKPOINT)
    paths = {folder: os.path.join(folder, CHECKPOINT) for folder in outs}
    resumed = {f: read_meta(p) for f, p in paths.items() if os.path.exists(p)}
    # The run's --seeds, where --out holds a run of other --seeds than asked.
    saved_seeds = None
    if args.seeds > 1 and os.path.exists(single):
        saved_seeds = read_meta(single).get("seeds", 1)
    elif args.seeds == 1 and not resumed:
        found = sorted(glob.glob(os.path.join(out, "seed[0-9]*", CHECKPOINT)))
        if found:
            saved_seeds = read_meta(found[0]).get("seeds", f"{len(found)} or more")
    if saved_seeds is not None:
        refuse_resume(out, resume_changes({"seeds": saved_seeds}, {"seeds": args.seeds}))
    if not resumed:
        where = single if args.seeds == 1 else " or ".join(paths.values())
        raise ValueError(f"--resume: no checkpoint at {where}; nothing to continue")
    asked = {
        "env": args.env,
        "seeds": args.seeds,
        "seed": args.seed,
        "schedule": args.schedule,
        "actors": args.actors,
        **config.to_dict(),
    }
    if args.target_return is not None:
        asked["target_return"] = args.target_return
    for k, folder in enumerate(outs):
        meta = resumed.get(folder)
        if meta is None:
            continue
        saved = {"env": meta.get("env_id"), "seed": meta.get("seed", 0) - k, **meta["config"]}
        saved |= {key: meta[key] for key in ("seeds", "schedule", "actors") if key in meta}
        if "target_return" in meta:
            saved["target_return"] = (
                NO_TARGET if meta["target_return"] is None else meta["target_return"]
            )
        refuse_resume(paths[folder], resume_changes(saved, asked))
        spent = meta.get("wall_time", 0.0)
        if _budget_stopped(meta, config) and args.time_budget is not None:
            if spent >= args.time_budget:
                raise ValueError(
                    f"--resume: {paths[folder]} stopped at its time budget after {spent:.1f} s "
                    f"of training; --time-budget {args.time_budget:g} is spent already: pass a "
                    "larger one, or none, to train on"
                )
    return resumed


def _budget_stopped(meta: dict, config: PPOConfig) -> bool:
    """Whether a checkpoint is of a run that `--time-budget` stopped (neither solved nor at
    the end of its budget of steps); it resumes as an unfinished one."""
    if "time_budget_stop" in meta:
        return bool(meta["time_budget_stop"])
    solved = (meta.get("solved") or {}).get("update")  # checkpoints written before the field
    return bool(meta.get("finished")) and solved is None and meta["update"] < config.num_updates


def _gather(run: _Shared, evaluations: list[dict]) -> dict:
    """The run's eval.json over its seeds (as agents.train's: lists per seed)."""
    per_seed = np.array([e["mean_return"] for e in evaluations])
    solved = [e["solved_per_seed"] for e in evaluations]
    return {
        "env": run.args.env,
        "deterministic": True,
        "seeds": [run.args.seed + k for k in range(len(evaluations))],
        "episodes_per_seed": [e["episodes"] for e in evaluations],
        "mean_return": float(per_seed.mean()),
        "std_return_over_seeds": float(per_seed.std()),
        "per_seed_mean_return": per_seed.tolist(),
        "steps_per_seed": [e["steps"] for e in evaluations],
        "target_return": run.target,
        "solved_per_seed": None if run.target is None else [s[0] for s in solved],
        "steps_to_target_per_seed": [e["steps_to_target_per_seed"][0] for e in evaluations],
        "rejected_checks": [e["rejected_checks"] for e in evaluations],
        "evaluation_wall_s": sum(e["evaluation_wall_s"] for e in evaluations),
        "wall_time": sum(e["wall_time"] for e in evaluations),
    }


def _train_seed(parser: argparse.ArgumentParser, run: _Shared, seed: int, out: str) -> dict:
    """One seed's whole run in `out`: resumed if its checkpoint is there under --resume (a
    finished one is read back), else from scratch."""
    args, config, learner, evaluator, target = (
        run.args, run.config, run.learner, run.evaluator, run.target
    )  # fmt: skip
    dc = dataclasses.replace(run.dc, seed=seed)
    ckpt_path = os.path.join(out, CHECKPOINT)
    eval_path = os.path.join(out, "eval.json")
    label = f"ppo {args.env} {dc.schedule}" + (f" seed {seed}" if args.seeds > 1 else "")
    # The flags --resume compares (main's _check_resume, before any seed trains).
    meta = {
        "algorithm": "ppo",
        "env_id": args.env,
        "schedule": dc.schedule,
        "actors": dc.actors,
        "seed": dc.seed,
        "seeds": args.seeds,
        "config": config.to_dict(),
        "target_return": target,
    }
    rows, wall_offset, solved = [], 0.0, {"update": None, "confirm": None, "rejected": []}
    resuming = args.resume and os.path.exists(ckpt_path)
    if resuming:
        try:
            state, saved = load_state(ckpt_path, learner)
        except ValueError as e:
            parser.error(str(e))
        budget_stopped = _budget_stopped(saved, config)
        if saved.get("finished") and not budget_stopped and os.path.exists(eval_path):
            with open(eval_path) as f:  # a seed done before: read back, not trained again
                return {"out": out, "checkpoint": ckpt_path, "eval": json.load(f), "state": state}
        if budget_stopped:
            print(
                f"[{label}] {ckpt_path}: the run stopped at its time budget after update "
                f"{int(state.update)}; --resume trains on from there",
                file=sys.stderr,
            )
        rows = [r for r in logs.read_metrics(out) if r["update"] <= int(state.update)]
        wall_offset = saved.get("wall_time", 0.0)
        solved.update(saved.get("solved", {}))
    else:
        state = learner.init(jax.random.key(seed))
    progress = logs.TrainingProgress(
        1, config.num_updates, label, None if args.quiet else sys.stdout, rows, wall_offset
    )
    final_episodes = max(config.eval_envs, MIN_EPISODES)
    final_seed = evaluation_seed(seed)
    evaluated_before = evaluator.wall_s
    last = {"return": np.nan, "episodes": 0}

    def save(state, finished: bool = False, time_budget_stop: bool = False) -> None:
        logs.write_metrics(out, progress.rows)
        extra = {"wall_time": progress.wall_time(), "solved": solved, "finished": finished}
        extra["time_budget_stop"] = time_budget_stop  # then --resume trains on
        save_state(ckpt_path, state, {**meta, **extra})

    def stop_check(state, u: int) -> tuple[float, float | None]:
        """(the check's mean return, the confirmation's or None); records a solve in `solved`."""
        check = float(evaluator.returns(state, config.eval_envs, check_seed(seed, u)).mean())
        if check < target:
            return check, None
        confirm = evaluator.returns(state, final_episodes, final_seed)
        if confirmed(check, confirm, target):
            solved.update(update=u, confirm=confirm.tolist())
        else:
            solved["rejected"].append(
                {"seed": seed, "step": u * config.batch_size, "update": u,
                 "check_return": check, "confirm_return": float(confirm.mean())}
            )  # fmt: skip
        return check, float(confirm.mean())

    def on_update(state, report) -> bool:
        if len(report.episode_returns):
            last["return"] = float(report.episode_returns.mean())
        last["episodes"] += len(report.episode_returns)
        u = report.update
        if u % config.log_every == 0 or u == config.num_updates:
            check = confirm = None
            if target is not None:
                check, confirm = stop_check(state, u)
            one = np.ones(1, np.float32)
            progress.report_chunk(
                u,
                report.env_steps,
                _metrics(u, report, last),
                None if check is None else check * one,
                None if check is None else int(solved["update"] is not None),
                None if confirm is None else confirm * one,
            )
        over = args.time_budget is not None and progress.wall_time() >= args.time_budget
        if over and not (u % config.log_every == 0 or u == config.num_updates):
            progress.report_chunk(u, report.env_steps, _metrics(u, report, last))
        if args.checkpoint_every and u % args.checkpoint_every == 0:
            save(state)
        return solved["update"] is not None or over

    # The profile leaves out the first two updates (compiling the update and the policy).
    skip = 2 if config.num_updates - int(state.update) > 2 else 0
    end = int(state.update) if solved["update"] is not None else config.num_updates
    result = run_decoupled(learner, dc, state, end, on_update, profile_after=skip)
    finished = result.interrupted is None
    budget_stop = finished and solved["update"] is None and int(result.state.update) < end
    save(result.state, finished=finished, time_budget_stop=budget_stop)
    if result.interrupted is not None:
        print(
            f"[{label}] {result.interrupted}: stopped after update {int(result.state.update)}; "
            f"checkpoint in {ckpt_path} (--resume continues it)",
            file=sys.stderr,
        )
        raise SystemExit(143 if result.interrupted == "SIGTERM" else 130)
    if solved["update"] is not None:  # the evaluation that confirmed it is the final one
        returns = np.asarray(solved["confirm"])
    else:
        returns = evaluator.returns(result.state, final_episodes, final_seed)
    steps_to_target = None if solved["update"] is None else solved["update"] * config.batch_size
    evaluation = {
        "env": args.env,
        "deterministic": True,
        "episodes": int(returns.size),
        "mean_return": float(returns.mean()),
        "returns": returns.tolist(),
        "steps": int(result.state.update) * config.batch_size,
        "target_return": target,
        # As agents.train's (one seed): solved means a stop check and this evaluation (pools
        # seeded apart from the check's) both reached the target (agents.loop.confirmed).
        "solved_per_seed": None if target is None else [solved["update"] is not None],
        "steps_to_target_per_seed": [steps_to_target],
        "rejected_checks": solved["rejected"],
        "evaluation_wall_s": evaluator.wall_s - evaluated_before,
        "wall_time": progress.wall_time(),
    }
    write_json_atomic(eval_path, finite_json(evaluation))
    curve = None
    if not args.no_plot and progress.rows:
        title = f"PPO on {args.env} ({dc.schedule}, {dc.actors} actors)"
        curve = logs.plot_curve(progress.rows, os.path.join(out, "curve.png"), title)
    stop = ""
    if target is not None:
        stop = f", solved at {steps_to_target:,} steps" if steps_to_target else ", not solved"
        stop += f" (target {target:g})"
    print(
        f"[{label}] evaluation (deterministic, {returns.size} episodes): "
        f"{returns.mean():.1f}{stop}; outputs in {out}"
    )
    if args.profile is not None:
        print(format_profile(result.profile))
        name = "decoupled_profile.json" if args.seeds == 1 else f"decoupled_profile_seed{seed}.json"
        path = os.path.join(args.profile, name)
        write_json_atomic(path, finite_json({"label": label, "threads": result.profile}))
    return {
        "out": out,
        "checkpoint": ckpt_path,
        "curve": curve,
        "eval": evaluation,
        "profile": result.profile,
        "state": result.state,
    }
