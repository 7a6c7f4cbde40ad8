"""`python -m benchmarks.offpolicy_solve`: measures and writes the suite's record."""

from benchmarks.offpolicy_solve.measure import main

raise SystemExit(main())
