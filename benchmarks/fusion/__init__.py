"""Scan against fused rollouts: the K sweep of steps fused per kernel launch."""

from benchmarks.harness.lazy import from_measure

__getattr__ = from_measure(__name__)
