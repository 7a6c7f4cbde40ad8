"""One front door to the benchmarks: `python -m benchmarks run --quick` measures, `report
--publish` publishes.

Usage:
  python -m benchmarks run --quick                 # every suite, a few minutes on 2 CPU cores
  python -m benchmarks run --full                  # the recorded run (an hour or more on 2 cores)
  python -m benchmarks run --suite throughput --suite fusion --baselines gymnax,torch
  python -m benchmarks run --smoke --out /tmp/b    # tiny sizes: checks the pipeline, not a result
  python -m benchmarks report --publish --results runs/bench/RUN  # refresh the committed figures
  python -m benchmarks list                        # suites and baselines, and which are installed

Measuring is not publishing: a run writes its records, RESULTS.md and plots into
runs/bench/<run id>/ (ignored by git; or --out), prints the summary table and the report's path,
and changes no tracked file. Only `report --publish` copies records into benchmarks/results/ and
rewrites benchmarks/RESULTS.md and the README's results section.

Each suite runs as its own process (`python -m benchmarks.<suite>.measure ...`, sizes per mode)
and writes its JSON record, with provenance, atomically into the output directory; a suite whose
module is missing, that fails or that times out is recorded as skipped or failed with the reason,
and the run carries on. `runs.jsonl` in the output directory gets one appended line per suite
(status, reason, record, command, wall time), so an interrupted run keeps every finished record.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import registry
from benchmarks.harness.arguments import name_list, positive_seconds
from benchmarks.harness.commands import portable_command
from benchmarks.harness.formatting import format_duration
from benchmarks.harness.optional import install_hint
from benchmarks.harness.paths import (  # noqa: F401 (MANIFEST: for callers and tests)
    MANIFEST,
    RESULTS_DIR,
    RUNS_DIR,
    inside,
)
from benchmarks.harness.registry import BASELINES, MODES, TIMEOUT_S, suite_available  # noqa: F401
from benchmarks.harness.runner import (
    SuiteProgress,
    append_manifest,
    probe_machine,
    raise_interrupt,
    record_path,
    run_suite,
    utc,
)
from benchmarks.harness.suite import Plan, Suite  # noqa: F401 (Suite: for callers and tests)


class UsageError(Exception):
    """Bad input found before anything runs."""


# ---------------------------------------------------------------------------------- validation
def parse_names(text: str, valid, what: str) -> list[str]:
    """Comma-separated names (or 'all' / 'none'), each one of `valid`; else UsageError."""
    try:
        return list(name_list(list(valid), what, none=True)(text))
    except argparse.ArgumentTypeError as e:
        raise UsageError(str(e)) from None


def check_writable(out_dir: Path) -> Path:
    """Creates `out_dir` if needed and proves a file can be written there; else UsageError. The
    published records' folder is refused: only `report --publish` writes there, after its
    checks."""
    out_dir = Path(out_dir)
    if inside(out_dir, RESULTS_DIR):
        raise UsageError(
            f"--out {out_dir}: inside the published records' folder {RESULTS_DIR}; a run writes "
            "elsewhere (default runs/bench/<run id>/) and `python -m benchmarks report --publish "
            "--results DIR` publishes it"
        )
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=out_dir, prefix=".write-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise UsageError(f"cannot write to output directory {str(out_dir)!r}: {e}") from None
    return out_dir.resolve()


# -------------------------------------------------------------------------------------- running
def run(args) -> int:
    named = ",".join(args.suite) if args.suite else "all"
    suites = parse_names(named, registry.runnable(), "suite(s)")
    if not suites:
        raise UsageError("no suite selected")
    baselines = parse_names(args.baselines, list(BASELINES), "baseline(s)")
    mode = args.mode
    run_id = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ") + f"-{os.getpid()}"
    out_dir = check_writable(args.out or RUNS_DIR / run_id)
    timeout_s = args.timeout_s or TIMEOUT_S[mode]

    started = time.perf_counter()
    print(
        f"benchmarks run {run_id}: mode {mode}, suites {', '.join(suites)}; "
        f"baselines {', '.join(baselines) or 'none'}; records -> {out_dir}",
        flush=True,
    )
    machine = probe_machine()
    prov = machine["provenance"]
    plan = Plan(mode, frozenset(baselines), prov["jax_backend"] == "gpu")
    print(
        f"machine {machine['machine_tag']}: {prov['device_kind']}, {prov['cpu_model']}, "
        f"{prov['cpu_count']} cores, load {prov['loadavg_1_5_15min']}; "
        f"jax {prov['versions']['jax']}; commit {prov['commit']}",
        flush=True,
    )
    if mode == "smoke":
        print("smoke mode: tiny sizes that check the pipeline; the figures are not results")
    base = {"run_id": run_id, "mode": mode, "machine_tag": machine["machine_tag"]}
    progress = SuiteProgress(len(suites), args.quiet)
    entries = []
    status = "ok"
    # SIGTERM (a CI timeout, `kill`) stops the run as Ctrl-C does: the suite's process group is
    # stopped too, and the manifest says so.
    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    # A suite that runs out of time gets SIGINT first, to clean up (harness/runner.py). A run
    # started in the background (`cmd &`, where the shell ignores SIGINT) would hand the ignoring
    # down to every suite, and a timed-out one would die by SIGKILL 10 s later, uncleaned. An
    # installed handler is not inherited across exec: the suites start with SIGINT's default.
    previous_int = signal.getsignal(signal.SIGINT)
    if previous_int == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        for i, name in enumerate(suites, 1):
            suite = registry.SUITES[name]
            out = record_path(out_dir, suite, machine["machine_tag"], mode)
            entry = {**base, **run_suite(suite, plan, out, timeout_s, progress, i)}
            append_manifest(out_dir, entry)
            entries.append(entry)
            progress.done(i, entry)
    except KeyboardInterrupt:
        status = "interrupted"
        left = [n for n in suites if n not in {e["suite"] for e in entries}]
        entry = {
            **base,
            "suite": left[0] if left else None,
            "status": "interrupted",
            "reason": "stopped by Ctrl-C or SIGTERM",
            "started_utc": utc(),
        }
        append_manifest(out_dir, entry)
        print(f"\ninterrupted: {len(entries)} finished suite record(s) kept in {out_dir}")
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
    wall = time.perf_counter() - started
    if status == "ok" and any(e["status"] == "failed" for e in entries):
        status = "failed"
    summary = {
        **base,
        "event": "run",
        "suite": None,
        "status": status,
        "suites": {e["suite"]: e["status"] for e in entries},
        "baselines": baselines,
        "wall_s": round(wall, 1),
        "command": portable_command(["python", "-m", "benchmarks", *args.argv]),
        "provenance": prov,
    }
    append_manifest(out_dir, summary)
    print(f"\nrun {run_id} {status} in {format_duration(wall)}:")
    for e in entries:
        print(f"  {e['suite']:<11} {e['status']:<8} {e.get('record') or e.get('reason') or ''}")
    if status == "interrupted":
        return 130
    if args.report:
        write_report(out_dir, mode)
    return 1 if status == "failed" else 0


def write_report(out_dir: Path, mode: str) -> None:
    """DIR/RESULTS.md and its plots from `out_dir`'s records; prints the summary table, the
    report's path and how to publish. Never touches a tracked file."""
    from benchmarks.report.cli import write_report as write

    print()
    report = write([out_dir], out_dir / "RESULTS.md", None, True, None, out_dir)
    print(f"\n{report.summary}\n\nreport: {out_dir / 'RESULTS.md'}")
    shown = shlex.quote(os.path.relpath(out_dir)) if inside(out_dir, Path.cwd()) else out_dir
    if mode == "smoke":
        print("(smoke figures check the pipeline; they are not results and cannot be published)")
    else:
        print(f"to publish these figures: python -m benchmarks report --publish --results {shown}")


def list_things() -> int:
    print("suites (python -m benchmarks run --suite NAME):")
    for s in registry.SUITES.values():
        note = f"  [skipped: {why}]" if (why := suite_available(s)) else ""
        if s.args is None:  # hours on a CPU: measured on its own
            note = f"  [not run by `run`: python -m {s.module}]"
        print(f"  {s.name:<11} {s.title}{note}")
    print("\nbaselines (python -m benchmarks run --baselines a,b; default all):")
    import importlib.metadata

    for name, (what, dist, suite) in BASELINES.items():
        try:
            where = f"{dist} {importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            where = f"{dist} not installed: reported as skipped; {install_hint(dist)}"
        print(f"  {name:<16} {what} ({suite}); {where}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.split("\n")[3:15]),
    )
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run benchmark suites and record their results")
    modes = r.add_mutually_exclusive_group()
    for m, what in (
        ("smoke", "tiny sizes: checks the pipeline end to end (CI); not a result"),
        ("quick", "a few minutes on a 2-core CPU (the default; the README's main job)"),
        ("full", "the sizes of the recorded results; an hour or more on 2 CPU cores"),
    ):
        modes.add_argument(f"--{m}", dest="mode", action="store_const", const=m, help=what)
    r.set_defaults(mode="quick")
    r.add_argument(
        "--suite",
        action="append",
        default=[],
        metavar="NAME",
        help=f"a suite to run (repeatable; default all): {', '.join(registry.runnable())}",
    )
    r.add_argument(
        "--baselines",
        default="all",
        metavar="A,B",
        help=f"baselines to measure: {', '.join(BASELINES)}, 'all' (default) or 'none'",
    )
    r.add_argument(
        "--out",
        type=Path,
        default=None,
        help="record directory (default runs/bench/<run id>/, ignored by git); never inside "
        "benchmarks/results/, which only `report --publish` writes",
    )
    r.add_argument(
        "--timeout-s", type=positive_seconds, default=None, help="per suite (default by mode)"
    )
    r.add_argument("--quiet", action="store_true", help="only a line per suite")
    r.add_argument(
        "--no-report",
        dest="report",
        action="store_false",
        help="records only: no RESULTS.md, plots or summary table in the record directory",
    )
    rep = sub.add_parser(
        "report",
        help="a run's RESULTS.md and plots; --publish: the committed records, RESULTS.md, README",
    )
    from benchmarks.report import cli

    cli.add_arguments(rep)
    sub.add_parser("list", help="the suites and baselines, and which are installed")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv
    try:
        if args.command == "run":
            return run(args)
        if args.command == "report":
            from benchmarks.report import cli

            return cli.main_from_args(args)
        return list_things()
    except UsageError as e:
        print(f"python -m benchmarks {args.command}: error: {e}", file=sys.stderr)
        return 2
    except (RuntimeError, subprocess.TimeoutExpired) as e:  # jax would not start
        print(f"python -m benchmarks {args.command}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
