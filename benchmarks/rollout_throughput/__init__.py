"""Rollout throughput: env-steps/s against num_envs, jaxsim beside the CPU and JAX baselines."""

from benchmarks.harness.lazy import from_measure

__getattr__ = from_measure(__name__)
