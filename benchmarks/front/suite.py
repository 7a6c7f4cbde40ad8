"""The front suite: host-stepped MinAtar through jaxsim's Gymnasium and SB3 fronts against the
original package, and CartPole's single env against Gymnasium's."""

from __future__ import annotations

from typing import Any

from benchmarks.front.section import front_section
from benchmarks.harness.suite import Suite
from benchmarks.report import schema as s


def problems(data: dict[str, Any]) -> list[str]:
    point = (("game", s.STR), ("front", s.STR), ("num_envs", s.INT), ("status", s.STR))
    ok = (
        ("steps_per_s.jaxsim.median", s.positive),
        ("steps_per_s.original.median", s.positive),
        ("jaxsim_over_original", s.positive),
        ("compile_s", s.non_negative),
        ("checks", s.DICT),
    )
    return s.points(data, point, ok, (("reason", s.STR),))


SUITE = Suite(
    name="front",
    module="benchmarks.front.measure",
    title="Host-stepped fronts: MinAtar through Gymnasium and SB3 against the original package",
    heading="## Host-stepped fronts: MinAtar against the original, CartPole against Gymnasium",
    problems=problems,
    section=front_section,
    # Run on its own (`python -m benchmarks.front.measure --out ...`), not by the front door:
    # its two child processes compile a dozen programs each, minutes that the front door's
    # smoke and quick runs do not have.
    args=None,
    missing_reason="the front suite needs gymnasium and the original minatar package",
)
