"""PPO's time to solve, jaxsim's one-jit loop beside Stable-Baselines3."""

from benchmarks.harness.lazy import from_measure

__getattr__ = from_measure(__name__)
