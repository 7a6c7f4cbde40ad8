"""`python -m benchmarks.peers`: measures and writes the suite's record."""

from benchmarks.peers.measure import main

raise SystemExit(main())
