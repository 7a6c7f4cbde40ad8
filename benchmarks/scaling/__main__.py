"""`python -m benchmarks.scaling`: measures and writes the suite's record."""

from benchmarks.scaling.measure import main

raise SystemExit(main())
