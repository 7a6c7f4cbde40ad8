"""On-policy against off-policy: the simulation share of a PPO, DQN and SAC update."""

from benchmarks.harness.lazy import from_measure

__getattr__ = from_measure(__name__)
