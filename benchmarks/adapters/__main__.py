"""`python -m benchmarks.adapters`: measures and writes the suite's record."""

from benchmarks.adapters.measure import main

raise SystemExit(main())
