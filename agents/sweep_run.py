"""`python -m agents.train ALGO --sweep NAME=V1,V2,... --seeds S`: a sweep as one compiled run.

Every combination of the `--sweep` values (float hyperparameters only: `agents.sweep`) x
`--seeds` trains in one program (`agents.sweep.Swept` under `agents.loop.run_chunks`), each
configuration with the keys its own run would have (the same `--seed`, the same seeds). Each
configuration is a run of its own in `<out>/config_<i>` (checkpoint.msgpack, config.json with
its concrete config, metrics.csv/jsonl, eval.json, curve.png: `agents.play` and
`agents.load_policy` read it as any run); the sweep writes `sweep.json` (the grid, every
configuration's final evaluation, the best one), `sweep.csv` and `sweep.md` (configuration x
seed -> final evaluation, solved, steps to the target) and `sweep.png`. The best configuration
is the one with the highest final evaluation return, mean over seeds.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import sys
from typing import Any

import jax
import numpy as np

from agents import loggers, logs, run_setup
from agents.algorithms import agent_type
from agents.checkpoint import sampler_ranges, save_checkpoint, sync_sidecar
from agents.loop import independent_evaluation, run_chunks
from agents.presets import config_for
from agents.sweep import Sweep, Swept, check_sweep, sweep_configs
from agents.train_args import (
    RUN_FILES,
    check_no_run,
    check_out,
    clear_run,
    config_overrides,
    setup_cache,
)
from atomicfiles import atomic_write, finite_json, remove_stale_temporaries, write_json_atomic

SWEEP_FORMAT = "jaxsim-agents-sweep/1"
SWEEP_FILES = ("sweep.json", "sweep.csv", "sweep.md", "sweep.png")
"""What a sweep writes in --out besides its configurations' folders."""


def config_folder(out: str, index: int) -> str:
    """The run folder of configuration `index` of the sweep in `out`."""
    return os.path.join(out, f"config_{index:02d}")


def values_text(values: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in values.items())


def main(parser: argparse.ArgumentParser, args: argparse.Namespace, command: str) -> dict:
    """Runs a sweep; returns its summary (sweep.json's content plus the paths written)."""
    agent_cls = agent_type(args.algorithm)
    run_setup.check_run_flags(parser, args)
    for flag, given in (("--devices", args.devices), ("--profile", args.profile)):
        if given is not None:
            parser.error(f"--sweep: {flag} is not supported in a sweep; run a configuration alone")
    try:
        loggers.check_installed(args.loggers)
    except ValueError as e:
        parser.error(str(e))
    seen: dict[str, str] = {}
    for flag in args.sweep:
        if flag.name in seen:
            parser.error(
                f"--sweep {flag.text}: {flag.name} is given twice (--sweep {seen[flag.name]})"
            )
        seen[flag.name] = flag.text
    cache_dir = setup_cache(parser, args)
    label = f"{args.algorithm} {args.env}"
    if not args.quiet:
        print(f"[{label}] XLA compilation cache: {cache_dir or 'off'}", flush=True)
    try:
        env, sampler = run_setup.make_env(parser, args.env, args.params)
        overrides = config_overrides(args, agent_cls.config_type)
        base = config_for(args.env, args.algorithm, **overrides)
        try:
            sweep = check_sweep(base, {f.name: f.values for f in args.sweep}, given=overrides)
        except ValueError as e:
            flags = " ".join(f"--sweep {f.text}" for f in args.sweep)
            parser.error(f"{flags}: {e}")
        configs = sweep_configs(base, sweep)
        out = args.out or os.path.join("runs", f"{args.env}_sweep")
        check_out(out)
        folders = [config_folder(out, i) for i in range(sweep.num_configs)]
        ckpts = None
        if args.resume:
            check_same_sweep(out, sweep)
            ckpts = [
                run_setup.load_for_resume(
                    os.path.join(f, "checkpoint.msgpack"), args, env, c, sampler
                )
                for f, c in zip(folders, configs, strict=True)
            ]
            updates = [c.meta["update"] for c in ckpts]
            if len(set(updates)) > 1:  # killed while saving the configurations one by one
                raise ValueError(
                    f"--resume: the configurations of {out} were saved at different updates "
                    f"({dict(zip((os.path.basename(f) for f in folders), updates, strict=True))}"
                    "): the sweep was stopped while writing its checkpoints and cannot continue "
                    "as one program; pass --overwrite to train it again"
                )
        else:
            check_no_sweep(out, folders, args.overwrite)
        target = run_setup.run_target(args, ckpts[0] if ckpts else None)
        if args.seed is None:
            args.seed = ckpts[0].meta.get("seed", 0) if ckpts else 0
        agent = agent_cls(base, env, params_sampler=sampler)
        run_setup.check_memory(agent, args.seeds * sweep.num_configs, film=False)
    except (ValueError, TypeError, OSError) as e:
        parser.error(str(e))
    if args.overwrite:
        for name in SWEEP_FILES:
            if os.path.exists(os.path.join(out, name)):
                os.remove(os.path.join(out, name))
        for folder in folders:
            clear_run(folder)
    for folder in [out, *folders]:
        os.makedirs(folder, exist_ok=True)
        for stale in remove_stale_temporaries(folder):
            print(f"removed {stale}, a temporary file of a run that was killed", file=sys.stderr)
        sync_sidecar(os.path.join(folder, "checkpoint.msgpack"))
    write_sweep_json(out, _sweep_meta(args, sweep, folders, target, command))
    swept = Swept(agent, sweep)
    progress = []
    for i, (folder, config) in enumerate(zip(folders, configs, strict=True)):
        ckpt = ckpts[i] if ckpts else None
        rows = []
        if ckpt:  # rows past the checkpoint (a run killed between checkpoints) are dropped
            rows = [r for r in logs.read_metrics(folder) if r["update"] <= ckpt.meta["update"]]
        progress.append(
            logs.TrainingProgress(
                args.seeds,
                config.num_updates,
                label=f"{label} {i}: {values_text(sweep.as_dicts()[i])}",
                stream=None if args.quiet else sys.stdout,
                rows=rows,
                wall_offset=ckpt.meta.get("wall_time", 0.0) if ckpt else 0.0,
            )
        )
    runner, solved, solved_wall = _train(
        args, swept, configs, folders, ckpts, target, progress, command
    )
    return _finish(
        args, swept, configs, folders, out, runner, solved, solved_wall, target, progress, command
    )


def _sweep_meta(args, sweep: Sweep, folders, target, command) -> dict[str, Any]:
    return {
        "format": SWEEP_FORMAT,
        "algorithm": args.algorithm,
        "env_id": args.env,
        "sweep": sweep.grid_dict(),
        "configs": [
            {"index": i, "folder": os.path.basename(f), "values": v}
            for i, (f, v) in enumerate(zip(folders, sweep.as_dicts(), strict=True))
        ],
        "num_seeds": args.seeds,
        "seed": args.seed,
        "target_return": target,
        "command": command,
    }


def write_sweep_json(out: str, meta: dict[str, Any]) -> None:
    write_json_atomic(os.path.join(out, "sweep.json"), finite_json(meta))


def check_no_sweep(out: str, folders: list[str], overwrite: bool) -> None:
    """Without --resume, --out must hold no sweep (sweep.json, a configuration's run) and no
    plain run, unless --overwrite gives the sweep up."""
    check_no_run(out, False)  # a plain run's files are never a sweep's to remove
    found = [n for n in SWEEP_FILES if os.path.exists(os.path.join(out, n))]
    found += [
        os.path.basename(f)
        for f in folders
        if any(os.path.exists(os.path.join(f, n)) for n in RUN_FILES)
    ]
    if found and not overwrite:
        raise ValueError(
            f"--out: {out} already holds a sweep ({', '.join(found)}); pass --resume to continue "
            "it, --overwrite to replace it, or another --out"
        )
    for folder in folders:
        check_no_run(folder, overwrite)  # --overwrite removes only files a run wrote


def check_same_sweep(out: str, sweep: Sweep) -> None:
    """--resume continues the sweep in `out` with the same --sweep values: a ValueError naming
    every hyperparameter whose values changed (the run's and the ones given) otherwise."""
    import json

    path = os.path.join(out, "sweep.json")
    try:
        with open(path) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        raise ValueError(f"--resume: no sweep to continue in {out} (no readable {path})") from None
    if meta.get("format") != SWEEP_FORMAT:
        raise ValueError(f"--resume: {path} is not a sweep file (format {meta.get('format')!r})")
    saved, asked = meta["sweep"], sweep.grid_dict()
    changes = []
    for name in dict.fromkeys([*saved, *asked]):
        was, now = saved.get(name), asked.get(name)
        if was != now:
            changes.append(f"{name}: the run's {_values(name, was)}, not {_values(name, now)}")
    if changes:
        raise ValueError(
            f"--resume: {out} is a sweep of other values ({'; '.join(changes)}); pass the run's "
            "--sweep flags to resume it, or a new --out"
        )


def _values(name: str, values: list[float] | None) -> str:
    if values is None:
        return f"no --sweep {name}"
    return f"--sweep {name}={','.join(f'{v:g}' for v in values)}"


def _slice(tree, c: int, seeds: int):
    return jax.tree.map(lambda x: x[c * seeds : (c + 1) * seeds], tree)


def _train(args, swept: Swept, configs, folders, ckpts, target, progress, command):
    """The chunked loop over every row; progress rows and checkpoints per configuration."""
    seeds, num_configs = args.seeds, swept.sweep.num_configs
    config = configs[0]  # every configuration's sizes (what chunks and steps follow) are one
    start = ckpts[0].meta["update"] if ckpts else 0
    if start < config.num_updates:
        first = min(config.log_every - start % config.log_every, config.num_updates - start)
        if args.checkpoint_every:
            first = min(first, args.checkpoint_every - start % args.checkpoint_every)
        later = (
            (config.log_every,) if start + first + config.log_every <= config.num_updates else ()
        )
        swept.precompile(seeds, (first, *later), evaluate=target is not None)
    if ckpts:
        runner = swept.join([c.runner for c in ckpts])
        solved = [u for c in ckpts for u in (c.meta.get("solved_update") or [None] * seeds)]
    else:
        runner = swept.jit_init()(jax.random.split(jax.random.key(args.seed), seeds))
        solved = None
    # The sweep's wall clock when each row was solved (all rows train at once); None: not
    # solved, or solved before a --resume.
    solved_wall: list[float | None] = [None] * (seeds * num_configs)

    def save(runner, solved) -> None:
        for c, inner in enumerate(swept.split(runner, seeds)):
            logs.write_metrics(folders[c], progress[c].rows)
            extra = {
                "wall_time": progress[c].wall_time(),
                "command": command,
                "seed": args.seed,
                "target_return": target,
                "solved_update": solved[c * seeds : (c + 1) * seeds],
                "devices": None,
                "sweep": {"index": c, "values": swept.sweep.as_dicts()[c]},
            }
            path = os.path.join(folders[c], "checkpoint.msgpack")
            save_checkpoint(path, inner, configs[c], swept.env, seeds, extra, swept.params_sampler)

    def on_chunk(report) -> None:
        for r, update in enumerate(report.solved_update):
            if update is not None and solved_wall[r] is None:
                solved_wall[r] = progress[r // seeds].wall_time()
        if report.done % config.log_every == 0 or report.done == config.num_updates:
            for c in range(num_configs):
                part = slice(c * seeds, (c + 1) * seeds)
                progress[c].report_chunk(
                    report.done,
                    report.done * config.steps_per_update,
                    _slice(report.metrics, c, seeds),
                    None if report.eval_returns is None else report.eval_returns[part],
                    sum(u is not None for u in report.solved_update[part]),
                    None if report.confirm_returns is None else report.confirm_returns[part],
                )
        if args.checkpoint_every and report.done % args.checkpoint_every == 0:
            save(report.runner, report.solved_update)

    runner, solved = run_chunks(
        swept,
        runner,
        config.num_updates,
        chunk=config.log_every,
        seed=args.seed,
        target=target,
        solved_update=solved,
        boundary=args.checkpoint_every or None,
        on_chunk=on_chunk,
        configs=num_configs,
    )
    done = int(np.max(np.asarray(runner.update)))
    if done > start and not (args.checkpoint_every and done % args.checkpoint_every == 0):
        save(runner, solved)
    return runner, solved, solved_wall


def _finish(
    args, swept, configs, folders, out, runner, solved, solved_wall, target, progress, command
):
    """Every configuration's final evaluation (its eval.json, curve), the table, the plot,
    the best configuration (printed and in sweep.json), and the --logger runs."""
    seeds, sweep = args.seeds, swept.sweep
    done = int(np.max(np.asarray(runner.update)))
    returns = independent_evaluation(swept, runner, args.seed, seeds, configs=sweep.num_configs)
    evaluations = []
    for c, folder in enumerate(folders):
        part = slice(c * seeds, (c + 1) * seeds)
        evaluation = run_setup.evaluation_summary(
            args.env,
            configs[c],
            returns[part],
            done,
            target,
            solved[part],
            progress[c].wall_time(),
        )
        evaluation["sweep"] = {"index": c, "values": sweep.as_dicts()[c]}
        # On the sweep's clock: every configuration trains at once, so this is when the seed
        # was solved in this sweep, not what its run alone would take.
        evaluation["wall_time_to_target_per_seed"] = solved_wall[part]
        write_json_atomic(os.path.join(folder, "eval.json"), finite_json(evaluation))
        if not args.no_plot and progress[c].rows:
            title = f"{args.algorithm.upper()} {args.env}: {values_text(sweep.as_dicts()[c])}"
            logs.plot_curve(progress[c].rows, os.path.join(folder, "curve.png"), title, target)
        evaluations.append(evaluation)
    means = np.array([e["mean_return"] for e in evaluations])
    best = int(np.nanargmax(means)) if np.isfinite(means).any() else 0
    table = sweep_table(sweep, folders, evaluations)
    write_table(out, sweep, table, evaluations, best)
    plot = None if args.no_plot else plot_sweep(out, sweep, evaluations, best, args)
    meta = _sweep_meta(args, sweep, folders, target, command)
    for entry, evaluation in zip(meta["configs"], evaluations, strict=True):
        entry["mean_return"] = evaluation["mean_return"]
        entry["std_return_over_seeds"] = evaluation["std_return_over_seeds"]
        entry["per_seed_mean_return"] = evaluation["per_seed_mean_return"]
        entry["steps_to_target_per_seed"] = evaluation["steps_to_target_per_seed"]
    meta["best"] = {
        "index": best,
        "folder": os.path.basename(folders[best]),
        "values": sweep.as_dicts()[best],
        "mean_return": evaluations[best]["mean_return"],
        "std_return_over_seeds": evaluations[best]["std_return_over_seeds"],
        "rule": "highest final evaluation return, mean over seeds",
    }
    meta["steps_per_seed"] = done * configs[0].steps_per_update
    meta["wall_time"] = progress[0].wall_time()
    write_sweep_json(out, meta)
    e = evaluations[best]
    print(
        f"[{args.algorithm} {args.env}] sweep of {sweep.num_configs} configurations x {seeds} "
        f"seed(s): best {best} ({values_text(sweep.as_dicts()[best])}): {e['mean_return']:.1f} "
        f"± {e['std_return_over_seeds']:.1f} over seeds (deterministic evaluation, "
        f"{e['episodes_per_seed']} episodes per seed); table in {os.path.join(out, 'sweep.md')}"
    )
    if args.loggers:
        _log_runs(args, swept, configs, folders, out, progress, evaluations, target, command)
    diverged = [c for c in range(sweep.num_configs) if not np.isfinite(means[c])]
    if diverged:
        print(
            f"[{args.algorithm} {args.env}] error: configuration(s) {diverged} diverged (final "
            f"evaluation not finite; outputs in {out})",
            file=sys.stderr,
        )
        raise SystemExit(1)
    return {**meta, "out": out, "table": os.path.join(out, "sweep.csv"), "plot": plot}


def sweep_table(sweep: Sweep, folders, evaluations) -> list[dict[str, Any]]:
    """One row per (configuration, seed): its values, final evaluation, solved, steps to target."""
    rows = []
    for c, evaluation in enumerate(evaluations):
        solved = evaluation["solved_per_seed"]
        for s, value in enumerate(evaluation["per_seed_mean_return"]):
            rows.append(
                {
                    "config": c,
                    "folder": os.path.basename(folders[c]),
                    **sweep.as_dicts()[c],
                    "seed": s,
                    "final_eval_return": value,
                    "solved": None if solved is None else solved[s],
                    "steps_to_target": evaluation["steps_to_target_per_seed"][s],
                    "sweep_wall_s_to_target": evaluation["wall_time_to_target_per_seed"][s],
                }
            )
    return rows


def write_table(out: str, sweep: Sweep, rows, evaluations, best: int) -> None:
    """sweep.csv (every row) and sweep.md (the rows, then a summary per configuration)."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: "" if v is None else v for k, v in r.items()} for r in rows)
    atomic_write(os.path.join(out, "sweep.csv"), text.getvalue().encode())

    def cell(v) -> str:
        if v is None:
            return "-"
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    names = list(sweep.names)
    lines = [
        "# Sweep",
        "",
        "| configuration | " + " | ".join(names) + " | mean ± std over seeds "
        "| solved | median steps to target |",
    ]
    lines.append("|" + " --- |" * (len(names) + 4))
    for c, evaluation in enumerate(evaluations):
        solved = evaluation["solved_per_seed"]
        steps = [s for s in evaluation["steps_to_target_per_seed"] if s is not None]
        mark = " (best)" if c == best else ""
        lines.append(
            f"| {c}{mark} | "
            + " | ".join(cell(sweep.as_dicts()[c][n]) for n in names)
            + f" | {evaluation['mean_return']:.1f} ± {evaluation['std_return_over_seeds']:.1f} | "
            + ("-" if solved is None else f"{sum(solved)}/{len(solved)}")
            + f" | {cell(float(np.median(steps))) if steps else '-'} |"
        )
    lines += ["", "Best: highest final evaluation return, mean over seeds.", ""]
    lines += ["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * len(rows[0])]
    lines += ["| " + " | ".join(cell(v) for v in r.values()) + " |" for r in rows]
    atomic_write(os.path.join(out, "sweep.md"), ("\n".join(lines) + "\n").encode())


def plot_sweep(out: str, sweep: Sweep, evaluations, best: int, args) -> str | None:
    """sweep.png: each configuration's final evaluation, seeds as dots, mean ± std as a bar."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot skipped: matplotlib is not installed", file=sys.stderr)
        return None
    from atomicfiles import write_figure_atomic

    n = sweep.num_configs
    fig, ax = plt.subplots(figsize=(max(5, 0.9 * n + 2), 4), dpi=100)
    for c, evaluation in enumerate(evaluations):
        color = "C1" if c == best else "C0"
        ax.bar(
            c,
            evaluation["mean_return"],
            yerr=evaluation["std_return_over_seeds"],
            color=color,
            alpha=0.5,
            capsize=3,
        )
        per_seed = evaluation["per_seed_mean_return"]
        ax.scatter([c] * len(per_seed), per_seed, color=color, s=12, zorder=3)
    ax.set_xticks(range(n))
    ax.set_xticklabels([values_text(v).replace(", ", "\n") for v in sweep.as_dicts()], fontsize=7)
    ax.set_ylabel("final evaluation return (deterministic)")
    ax.set_title(
        f"{args.algorithm.upper()} {args.env}: {n} configurations x {args.seeds} seeds "
        f"(best: {best})"
    )
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    path = os.path.join(out, "sweep.png")
    write_figure_atomic(fig, path)
    plt.close(fig)
    return path


def _log_runs(args, swept, configs, folders, out, progress, evaluations, target, command):
    """Each configuration as its own --logger run (its folder's tensorboard/ or wandb/), in
    the W&B group named after the sweep's --out, written once training is done: every metrics
    row, then the final evaluation. A resumed sweep logs them afresh."""
    group = os.path.basename(os.path.abspath(out))
    for c, folder in enumerate(folders):
        logged = finite_json(
            {
                "algorithm": args.algorithm,
                "env_id": args.env,
                "env_overrides": swept.env.make_kwargs(),
                "uniform_params": sampler_ranges(swept.params_sampler),
                "num_seeds": args.seeds,
                "seed": args.seed,
                "target_return": target,
                "command": command,
                "sweep": {"group": group, "index": c, "values": swept.sweep.as_dicts()[c]},
                "config": configs[c].to_dict(),
            }
        )
        with loggers.open_loggers(args.loggers, folder, logged, None, group=group) as sink:
            for row in progress[c].rows:
                sink.log_row(row)
            sink.log_evaluation(evaluations[c])
