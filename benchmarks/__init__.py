"""Benchmarks that measure jaxsim beside the simulators people use today; results go to results/."""
