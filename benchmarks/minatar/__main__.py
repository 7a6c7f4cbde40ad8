"""`python -m benchmarks.minatar`: measures and writes the suite's record."""

from benchmarks.minatar.measure import main

raise SystemExit(main())
