"""The decoupled (actor-learner) mode's benchmarks: time to solve CartPole through EnvPool beside
Stable-Baselines3 on the same environments (the suite), and free vs reproducible curves."""

from benchmarks.harness.lazy import from_measure

__getattr__ = from_measure(__name__)
