"""`python -m benchmarks.results_report`: the same as `python -m benchmarks report`."""

from benchmarks.results_report.cli import main

raise SystemExit(main())
