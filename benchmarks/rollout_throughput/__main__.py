"""`python -m benchmarks.rollout_throughput`: measures and writes the suite's record."""

from benchmarks.rollout_throughput.measure import main

raise SystemExit(main())
