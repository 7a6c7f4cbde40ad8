"""`python -m jaxsim.profiler`: run a program under the phase profiler, like `python -m cProfile`.

  python -m jaxsim.profiler [-o DIR] [--phases a,b] [--baseline N] -m module [args...]
  python -m jaxsim.profiler [-o DIR] [--phases a,b] [--baseline N] script.py [args...]
  python -m jaxsim.profiler show prof/rollout.json

The first two run the target (`runpy`, with `sys.argv` set to the target and its arguments) once
inside `with jaxsim.profile():`, print the per-phase table (device, device idle and host time;
dispatches; compile time) and, with `-o DIR`, write `<name>.json`, `<name>.png` and the Perfetto
trace `<name>.trace.json.gz` there. Everything after the module or script belongs to it:
`python -m jaxsim.profiler -o prof -m agents.train ppo --env CartPole-v1`. `--baseline N` first
runs the target N times uninstrumented, in child processes: the overhead correction is
calibrated on the first (and every other) run and checked against the others (N >= 2). A script
named `show` is run as `./show`.

To profile `jaxsim.rollout` itself: `python -m benchmarks.micro.profile_rollout` (the profiler
knows no environment).

The target runs in this process after jax was imported and its backend started (the trace needs
it): set XLA_FLAGS and JAX_PLATFORMS in the environment, not inside the target. Profile a short
run: every op of it is recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import runpy
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jaxsim.profiler import (
    DEFAULT_PHASES,
    ProfileReport,
    check_output_dir,
    parse_phases,
    profile,
)
from jaxsim.profiler._capture import CompileMonitor

SUBCOMMANDS = ("show",)


# ---------------------------------------------------------------------------------- the runner
def runner_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jaxsim.profiler",
        usage="python -m jaxsim.profiler [options] (-m module | script.py | rollout | show) ...",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-o", "--out", default=None, help="folder for JSON, PNG, Perfetto trace")
    parser.add_argument(
        "--phases",
        type=parse_phases,
        default=DEFAULT_PHASES,
        help=f"comma-separated named scopes to report (default {','.join(DEFAULT_PHASES)})",
    )
    parser.add_argument("--name", default=None, help="file stem (default: the target's name)")
    parser.add_argument("--no-png", action="store_true", help="skip the PNG")
    parser.add_argument(
        "--baseline",
        type=int,
        default=0,
        metavar="N",
        help="first run the target N times uninstrumented, in child processes: the first (and "
        "every other) run calibrates the overhead correction, the others check it",
    )
    parser.add_argument(
        "--untraced-json",
        default=None,
        help=argparse.SUPPRESS,  # internal: the --baseline child writes its timings here
    )
    parser.add_argument("-m", dest="module", default=None, help="run a module as a program")
    return parser


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """(the profiler's options, the target: ["-m", module, *args] or [script, *args]).

    The target starts at `-m` or at the first argument that is not an option (or an option's
    value); everything from there on is the target's, options included, as with cProfile.
    """
    takes_value = {"-o", "--out", "--phases", "--name", "--baseline", "--untraced-json"}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "-m":
            return argv[:i], argv[i:]
        if arg.startswith("-m") and not arg.startswith("--"):  # -mpackage.module
            return argv[:i], ["-m", arg[2:], *argv[i + 1 :]]
        if arg == "--":
            return argv[:i], argv[i + 1 :]
        if not arg.startswith("-"):
            return argv[:i], argv[i:]
        if arg in takes_value:
            i += 2
            continue
        i += 1
    return argv, []


def _target_name(target: list[str]) -> str:
    stem = target[1].rsplit(".", 1)[-1] if target[0] == "-m" else Path(target[0]).stem
    stem = re.sub(r"[^A-Za-z0-9_.\-]", "_", stem).lstrip("._-")
    return stem or "program"


def run_target(target: list[str]) -> None:
    """Runs ["-m", module, *args] or [script, *args] as `python` would, in this process.

    SystemExit(0) (or None) is a normal end; another exit code is raised as SystemExit.
    """
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    try:
        if target[0] == "-m":
            if len(target) < 2:
                raise ValueError("-m needs a module name")
            sys.argv = [target[1], *target[2:]]
            if "" not in sys.path and os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            runpy.run_module(target[1], run_name="__main__", alter_sys=True)
        else:
            script = target[0]
            if not os.path.isfile(script):
                raise FileNotFoundError(f"no such script: {script!r}")
            sys.argv = list(target)
            sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            raise
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def _untraced(target: list[str], path: str) -> None:
    """The --baseline child: run the target uninstrumented, write its wall and compile time."""
    with CompileMonitor() as compiles:
        t0 = time.perf_counter()
        run_target(target)
        wall = time.perf_counter() - t0
    Path(path).write_text(json.dumps({"wall_s": wall, "compile_s": compiles.total_s}))


def _baseline(target: list[str], n: int) -> list[dict]:
    """Runs the target n times uninstrumented, each in a child process; their timings."""
    runs = []
    with tempfile.TemporaryDirectory(prefix="jaxsim-profile-baseline-") as tmp:
        for i in range(n):
            path = os.path.join(tmp, f"baseline{i}.json")
            cmd = [sys.executable, "-m", "jaxsim.profiler", "--untraced-json", path, *target]
            print(f"[jaxsim.profiler] baseline run {i + 1}/{n}, uninstrumented", flush=True)
            done = subprocess.run(cmd, check=False)
            if done.returncode != 0 or not os.path.exists(path):
                raise RuntimeError(
                    f"profile: uninstrumented baseline run {i + 1} failed (exit code "
                    f"{done.returncode})"
                )
            runs.append(json.loads(Path(path).read_text()))
    print("[jaxsim.profiler] baselines done; now the profiled run", flush=True)
    return runs


def run(argv: list[str]) -> ProfileReport | None:
    options, target = split_argv(argv)
    parser = runner_parser()
    args = parser.parse_args(options)
    if args.module is not None:  # "-m" given to argparse means the target had no arguments
        target = ["-m", args.module, *target]
    if not target:
        parser.error("give a target: -m module [args...] or script.py [args...]")
    if args.untraced_json:
        _untraced(target, args.untraced_json)
        return None
    if target[0] != "-m" and not os.path.isfile(target[0]):
        parser.error(f"no such script: {target[0]!r} (a module is run with -m)")
    name = args.name or _target_name(target)
    try:  # everything that can be wrong with the options fails here, before the target runs
        prof = profile(phases=args.phases, out_dir=args.out, name=name, png=not args.no_png)
        if args.out is not None:
            check_output_dir(args.out)
    except (ValueError, TypeError, OSError) as e:
        parser.error(str(e))
    if args.baseline < 0:
        parser.error(f"--baseline must be >= 0, got {args.baseline}")
    if args.baseline:
        prof.baseline = _baseline(target, args.baseline)
    with prof:
        run_target(target)
    print(prof.report.format_table(), flush=True)
    return prof.report


# ------------------------------------------------------------------------------------- show
def subcommand_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jaxsim.profiler", description="show a saved report"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("show", help="print the table of a saved <name>.json report")
    show.add_argument("report")
    return parser


def main(argv: list[str] | None = None) -> ProfileReport | None:
    """Runs the command line; returns the report (None for the --baseline child)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in SUBCOMMANDS:
        parser = subcommand_parser()
        args = parser.parse_args(argv)
        try:
            report = ProfileReport.load(args.report)
        except (ValueError, TypeError, OSError) as e:
            parser.exit(2, f"error: {e}\n")
        print(report.format_table())
        return report
    return run(argv)  # the target's own exceptions propagate with their traceback


if __name__ == "__main__":
    main()
