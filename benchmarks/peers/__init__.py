"""jaxsim's agents beside the JAX training stacks (brax's PPO trainer, rejax), each in its venv."""

from benchmarks.harness.lazy import from_measure

__getattr__ = from_measure(__name__)
