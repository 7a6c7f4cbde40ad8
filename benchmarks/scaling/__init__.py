"""Rollout env-steps/s against the device count, the batch split over a mesh."""

from benchmarks.harness.lazy import from_measure

__getattr__ = from_measure(__name__)
