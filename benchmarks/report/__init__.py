"""Writes benchmarks/RESULTS.md, its plots and the README's results section from the JSON records.

Usage:
  python -m benchmarks report                          # the newest run under runs/bench/
  python -m benchmarks report --results DIR --out RESULTS.md --readme README.md --mode quick
  python -m benchmarks report --publish --results runs/bench/RUN    # the committed figures

Nothing in the output is typed by hand: every figure is read from a record (a suite's JSON, with
its provenance) and every ratio is computed within one record, i.e. within one run. Records are
found recursively, so a GPU run's directory (benchmarks/gpu_check.sh OUT_DIR) placed under the
results directory is reported beside the CPU's, marked with its device. For each benchmark and
machine the newest full or quick record is used (a smoke one only if there is no other), or the
newest of `--mode`; a suite that declares scopes (the throughput suite: a sweep over batch sizes,
a long run at one size) has the newest record of each scope shown. A record that cannot be read,
lacks a field or holds a zero, negative or non-finite figure is not used: it is named, with the
field, in RESULTS.md and on stderr, and an older record shown in its place says so; every other
file it passes over is named on stderr.

The one report layer. Below the suites: records (finding, checking and choosing them), schema
(field checks), markdown (and the plots' helpers), what each suite's `suite.py` draws its
section with, and publish (copying records, with coverage). Above them: document (RESULTS.md,
one section per suite of the registry, drawn by the suite's `suite.py`), headline (the
published figures beside the measured ones, across suites), readme (the README's section) and
cli.
"""
