"""jaxsim's native MinAtar games beside gymnax's, jaxsim's gymnax adapter and the original."""

from benchmarks.harness.lazy import from_measure

__getattr__ = from_measure(__name__)
