"""The profiler's breakdown of a PPO iteration: simulation, policy, learning, host."""

from benchmarks.harness.lazy import from_measure

__getattr__ = from_measure(__name__)
