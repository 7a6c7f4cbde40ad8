"""Writes benchmarks/RESULTS.md, its plots and the README's results section from the JSON records.

Usage:
  python -m benchmarks report                          # records under benchmarks/results/
  python -m benchmarks report --results DIR --out RESULTS.md --readme README.md --mode quick

Nothing in the output is typed by hand: every figure is read from a record (a suite's JSON, with
its provenance) and every ratio is computed within one record, i.e. within one run. Records are
found recursively, so a GPU run's directory (benchmarks/gpu_check.sh OUT_DIR) placed under the
results directory is reported beside the CPU's, marked with its device. For each benchmark and
machine the newest full or quick record is used (a smoke one only if there is no other), or the
newest of `--mode`. A record that cannot be read, lacks a field or holds a zero, negative or
non-finite figure is not used: it is named, with the field, in RESULTS.md and on stderr, and an
older record shown in its place says so.

Modules: records (finding, checking and choosing records), schema (the field checks each suite's
schema is written with), document (RESULTS.md, one section per suite of the registry, each drawn
by the suite's own report module), headline, readme, plots, markdown, publish, cli.
"""
