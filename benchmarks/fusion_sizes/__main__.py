"""`python -m benchmarks.fusion_sizes`: measures and writes the suite's record."""

from benchmarks.fusion_sizes.measure import main

raise SystemExit(main())
