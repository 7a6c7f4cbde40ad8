"""The front section of the results report: host-stepped MinAtar against the original."""

from __future__ import annotations

from pathlib import Path

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
