"""`python -m benchmarks.fusion`: measures and writes the suite's record."""

from benchmarks.fusion.measure import main

raise SystemExit(main())
