"""`python -m benchmarks.breakdown`: measures and writes the suite's record."""

from benchmarks.breakdown.measure import main

raise SystemExit(main())
