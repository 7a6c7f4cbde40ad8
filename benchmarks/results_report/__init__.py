"""The sections of the results report, one module per suite (moving into the suites)."""
