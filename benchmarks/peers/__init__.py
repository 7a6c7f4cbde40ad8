"""jaxsim's agents beside the JAX training stacks (brax's trainers, rejax, SBX), each in a venv."""

from benchmarks.harness.lazy import from_measure

__getattr__ = from_measure(__name__)
