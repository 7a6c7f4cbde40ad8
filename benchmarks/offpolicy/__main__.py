"""`python -m benchmarks.offpolicy`: measures and writes the suite's record."""

from benchmarks.offpolicy.measure import main

raise SystemExit(main())
