"""The peers suite: jaxsim's agents beside brax's PPO and SAC trainers, rejax and SBX, each peer
in its own venv (`bash benchmarks/peers/setup_envs.sh`), skipped with that command where it is
absent. brax cases: PPO speed on inverted_pendulum and ant, PPO and SAC time to a return of 1000
on inverted_pendulum; time to a score on ant is out of scope (brax's published 50M-step ant run
is hours of CPU per side)."""

from __future__ import annotations

from typing import Any

from benchmarks.harness.suite import Plan, Suite
from benchmarks.peers.section import peers_section
from benchmarks.report import schema as s
from benchmarks.report.coverage import NOT_MEASURED

_COMPARISON = (("comparison", s.DICT), ("comparison.ratio", s.optional(s.positive)))


def args(p: Plan) -> list[str]:
    if p.mode == "smoke":
        return ["--smoke", "--cases", "rejax_ppo"]  # rejax's compile is the cheapest peer's
    if p.mode == "quick":
        return ["--cases", "brax_ppo_speed,rejax_ppo", "--seeds", "1"]
    return []


def problems(data: dict[str, Any]) -> list[str]:
    cases = data.get("cases")
    if not isinstance(cases, dict) or not cases:
        return ["field 'cases' must be a non-empty dict of case -> result"]
    found = []
    for name, case in cases.items():
        if not isinstance(case, dict):
            found.append(f"field 'cases.{name}' must be a dict")
        elif not any(status in case for status in NOT_MEASURED):
            found += s.check(case, f"cases.{name}", _COMPARISON)
    return found


SUITE = Suite(
    name="peers",
    module="benchmarks.peers.measure",
    title="jaxsim's agents beside brax's trainers, rejax and SBX (JAX peers, own venvs)",
    heading="## Against the JAX peers: brax's trainer and rejax",
    problems=problems,
    section=peers_section,
    args=args,
    no_record=(
        "Not measured (no peers record: `bash benchmarks/peers/setup_envs.sh` makes the peers' "
        "venvs, then `python -m benchmarks.peers.measure` writes one)."
    ),
)
