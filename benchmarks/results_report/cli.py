"""The command line of the results report: `python -m benchmarks report [options]`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.paths import REPO_ROOT, RESULTS_DIR
from benchmarks.results_report.document import build
from benchmarks.results_report.readme import update_readme, write_text_atomic
from benchmarks.results_report.records import MODE_ORDER

PROG = "python -m benchmarks report"
RESULTS_MD = REPO_ROOT / "benchmarks" / "RESULTS.md"
README = REPO_ROOT / "README.md"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--results",
        type=Path,
        action="append",
        default=None,
        help="directory of records, searched recursively (repeatable; default benchmarks/results)",
    )
    p.add_argument("--out", type=Path, default=RESULTS_MD, help="the Markdown report to write")
    p.add_argument("--readme", type=Path, default=README, help="README whose section to rewrite")
    p.add_argument("--no-readme", action="store_true", help="leave the README alone")
    p.add_argument("--mode", choices=MODE_ORDER, default=None, help="only records of this mode")
    p.add_argument("--no-plots", action="store_true", help="tables only")


def main_from_args(args) -> int:
    dirs = [d.resolve() for d in (args.results or [RESULTS_DIR])]
    missing = [str(d) for d in dirs if not d.is_dir()]
    if missing:
        print(f"{PROG}: error: no such directory {missing}", file=sys.stderr)
        return 2
    out = args.out.resolve()
    readme = args.readme.resolve()
    report = build(dirs, out, args.mode, plots=not args.no_plots, readme=readme)
    for bad in report.invalid:
        print(f"{PROG}: invalid record {bad.describe()}", file=sys.stderr)
    for note in report.stale_notes:
        print(f"{PROG}: {note}", file=sys.stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, report.results_md)
    print(f"wrote {out}")
    if not args.no_readme:
        changed = update_readme(readme, report.readme_section)
        print(f"{'updated' if changed else 'unchanged'}: {args.readme}")
    return 0


def main(argv=None) -> int:
    from benchmarks import results_report

    p = argparse.ArgumentParser(
        prog="python -m benchmarks.results_report",
        description=results_report.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(p)
    return main_from_args(p.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
