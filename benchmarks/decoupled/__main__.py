"""`python -m benchmarks.decoupled`: measures and writes the suite's record."""

from benchmarks.decoupled.measure import main

raise SystemExit(main())
