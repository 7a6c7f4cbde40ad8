"""brax and gymnax through jaxsim.rollout beside their own jitted loops."""

from benchmarks.harness.lazy import from_measure

__getattr__ = from_measure(__name__)
