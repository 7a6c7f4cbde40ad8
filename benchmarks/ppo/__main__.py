"""`python -m benchmarks.ppo`: measures and writes the suite's record."""

from benchmarks.ppo.measure import main

raise SystemExit(main())
