"""Scan against fused on Swarm-v0 as its state grows, beside a memory-traffic model."""

from benchmarks.harness.lazy import from_measure

__getattr__ = from_measure(__name__)
