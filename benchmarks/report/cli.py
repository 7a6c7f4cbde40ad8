"""The command line of the results report: `python -m benchmarks report [options]`.

Without `--publish` no tracked file is touched: the report of a run (by default the newest under
runs/bench/) goes beside its records. `--publish` is the explicit act that refreshes the
project's figures: it checks every file of the given runs, publishes nothing if any record is
invalid, then copies their records into benchmarks/results/ and rewrites benchmarks/RESULTS.md,
its plots and the README's results section from the published records. A run whose records
would show less than the published ones they replace (fewer cases, baselines or modes, or
measured at a higher load) is refused, naming what it would lose, unless `--replace` is given;
the replaced records are then kept under benchmarks/results/history/. `--mode` only reports:
the tracked reports always show every mode. Every file under the record folders that the report
does not use is named on stderr.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from benchmarks.harness import registry
from benchmarks.harness.paths import MANIFEST, REPO_ROOT, RESULTS_DIR, RUNS_DIR, inside
from benchmarks.report.document import Report, build, checks
from benchmarks.report.publish import PublishError, publish
from benchmarks.report.readme import update_readme, write_text_atomic
from benchmarks.report.records import MODE_ORDER

PROG = "python -m benchmarks report"
RESULTS_MD = REPO_ROOT / "benchmarks" / "RESULTS.md"
README = REPO_ROOT / "README.md"


class ReportError(Exception):
    """Bad input to the report, found before any file is written."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--results",
        type=Path,
        action="append",
        default=None,
        help="directory of records, searched recursively (repeatable; default: the newest run "
        "under runs/bench/, or benchmarks/results/ with --publish)",
    )
    p.add_argument(
        "--publish",
        action="store_true",
        help="check the --results runs (any invalid record: nothing is published), copy their "
        "records into benchmarks/results/, then rewrite "
        "benchmarks/RESULTS.md, its plots and the README's results section (tracked files)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the Markdown report (default DIR/RESULTS.md beside the records of a run; "
        "benchmarks/RESULTS.md with --publish)",
    )
    p.add_argument(
        "--readme",
        type=Path,
        default=None,
        help="README whose results section to rewrite (default: README.md with --publish only)",
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="with --publish: publish records that show less than the published ones they "
        "replace (fewer cases, baselines or modes, a busier machine); those are kept under "
        "benchmarks/results/history/",
    )
    p.add_argument("--no-readme", action="store_true", help="leave the README alone")
    p.add_argument(
        "--mode",
        choices=MODE_ORDER,
        default=None,
        help="only records of this mode (a report of a run; not with --publish, whose reports "
        "show every mode)",
    )
    p.add_argument("--no-plots", action="store_true", help="tables only")


def newest_run(runs_dir: Path | None = None) -> Path:
    """The newest front-door run under `runs_dir` (default runs/bench/; a run is a folder with a
    run log), else ReportError."""
    runs_dir = runs_dir or RUNS_DIR
    runs = [d for d in runs_dir.glob("*/") if (d / MANIFEST).is_file()] if runs_dir.is_dir() else []
    if not runs:
        raise ReportError(
            f"no run under {runs_dir}: run `python -m benchmarks run` first, or name records "
            "with --results DIR"
        )
    return max(runs, key=lambda d: ((d / MANIFEST).stat().st_mtime, d.name))


def _default_out(dirs: list[Path]) -> Path:
    """Beside the records of a run; a report of records elsewhere (the published ones, say) goes
    to a new folder under runs/, so no tracked file changes."""
    if inside(dirs[0], REPO_ROOT / "runs") or not inside(dirs[0], REPO_ROOT):
        return dirs[0] / "RESULTS.md"
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    return RUNS_DIR.parent / "report" / stamp / "RESULTS.md"


def main_from_args(args, published: Path = RESULTS_DIR) -> int:
    try:
        return _main(args, published)
    except (ReportError, PublishError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2


def _refuse_tracked_outputs(args, published: Path) -> None:
    """ReportError unless the tracked reports and records are written by `--publish` alone, and
    by it in full: a report of one mode (`--mode`) never replaces them."""
    if args.publish:
        if args.mode is not None:
            raise ReportError(
                f"--mode {args.mode} with --publish would rewrite the published reports from "
                f"{args.mode} records only; the published reports show every mode: drop --mode "
                "(or drop --publish for a report of that mode beside the run)"
            )
        return
    if args.replace:
        raise ReportError("--replace is for --publish")
    for flag, path, tracked in (("--out", args.out, RESULTS_MD), ("--readme", args.readme, README)):
        if path is None:
            continue
        path = path.resolve()
        if path == tracked or inside(path, published):
            raise ReportError(
                f"{flag} {path}: a tracked report or the published records' folder; only "
                "--publish writes there, after checking the records"
            )


def _main(args, published: Path) -> int:
    _refuse_tracked_outputs(args, published)
    dirs = [d.resolve() for d in (args.results or [])]
    if not dirs and not args.publish:
        dirs = [newest_run()]
    missing = [str(d) for d in dirs if not d.is_dir()]
    if missing:
        raise ReportError(f"no such directory {missing}")
    if args.publish:
        runs = [d for d in dirs if not inside(d, published)]
        suites = registry.by_benchmark()
        scopes = {key: suite.scope for key, suite in suites.items() if suite.scope}
        publish(runs, published, checks(suites), scopes, args.replace)
        dirs = [published]
        out = (args.out or RESULTS_MD).resolve()
        readme = None if args.no_readme else (args.readme or README).resolve()
        plot_dir = None  # beside the published records, which RESULTS.md links to
    else:
        out = (args.out or _default_out(dirs)).resolve()
        readme = None if args.no_readme or args.readme is None else args.readme.resolve()
        plot_dir = out.parent  # never beside records that may be tracked
    write_report(dirs, out, args.mode, not args.no_plots, readme, plot_dir)
    return 0


def write_report(
    dirs: list[Path],
    out: Path,
    mode: str | None,
    plots: bool,
    readme: Path | None,
    plot_dir: Path | None,
) -> Report:
    """Builds the report of `dirs`' records, writes it to `out` (plots into `plot_dir`, or
    beside their records if None) and `readme`'s section if given; problems go to stderr."""
    report = build(dirs, out, mode, plots=plots, readme=readme or README, plot_dir=plot_dir)
    for bad in report.invalid:
        print(f"{PROG}: invalid record {bad.describe()}", file=sys.stderr)
    for note in report.stale_notes:
        print(f"{PROG}: {note}", file=sys.stderr)
    for path, why in report.ignored:
        print(f"{PROG}: ignored {path}: {why}", file=sys.stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, report.results_md)
    print(f"wrote {out}")
    if readme is not None:
        changed = update_readme(readme, report.readme_section)
        print(f"{'updated' if changed else 'unchanged'}: {readme}")
    return report


def main(argv=None, published: Path = RESULTS_DIR) -> int:
    """`published`: where `--publish` puts records (the committed benchmarks/results/)."""
    p = argparse.ArgumentParser(
        prog=PROG,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(p)
    return main_from_args(p.parse_args(argv), published)
