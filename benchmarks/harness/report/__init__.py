"""What every suite's report section and schema are written with: records (finding, checking and
choosing them), schema (field checks), markdown and plots; and publishing records (publish).
benchmarks/report/ composes the suites' sections into RESULTS.md."""
