"""The front suite: host-stepped MinAtar through jaxsim's Gymnasium and SB3 fronts against the
original package, and CartPole's single env against Gymnasium's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness.suite import Suite
from benchmarks.report import schema as s
from benchmarks.report.markdown import provenance_block
from benchmarks.report.records import Record


def front_section(r: Record, base: Path, plot: Path | None = None) -> str:
    d = r.data
    parts = [
        f"### Host-stepped fronts, one step per Python call: {r.device}",
        provenance_block(r, base),
        "env-steps/s of jaxsim's Gymnasium fronts (`gymnasium.make`, `gymnasium.make_vec`, the "
        "SAME_STEP vector env the SB3 VecEnv wraps, and the SB3 VecEnv where SB3 is installed) "
        "against the original `minatar` package through Gymnasium (`gymnasium.make`, "
        "SyncVectorEnv, SB3's DummyVecEnv), uniform random actions, every output read on the "
        "host each step; CartPole-v1's and Pendulum-v1's single env against Gymnasium's, and "
        "CartPole's vector env against Gymnasium's numpy CartPoleVectorEnv. Medians of "
        "alternating repeats; the ratio is the median of paired per-repeat ratios. Targets: "
        "jaxsim / original >= 1 (MinAtar, CartPole's vector env), jaxsim's step time <= 2x "
        "Gymnasium's (single envs).",
        d.get("table", ""),
    ]
    failed = [t["name"] for t in d.get("targets", []) if t.get("status") != "pass"]
    if failed:
        parts.append("Targets not met: " + "; ".join(failed) + ".")
    return "\n\n".join(parts)


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
