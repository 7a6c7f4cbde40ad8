"""The rejax cases: each one's environment on both sides, target, settings and budgets (data and
arithmetic only: importable without the rejax venv, which peer_rejax.py runs in)."""

from __future__ import annotations

import dataclasses
from typing import Any

CARTPOLE_TARGET = 475.0  # CartPole-v1's return to solve, every algorithm

# Breakout-MinAtar's target. gymnax-blines' PPO checkpoint scores 28, but rejax's published run
# (peer_rejax.BREAKOUT: cleanRL's ppo.py defaults, 500k steps, as rejax's README states for its
# Breakout-MinAtar benchmark) does not get near it: its deterministic evaluation (32 episodes)
# reached 3.0 by 24k steps and 5.5-5.6 on every seed by 57k, then held 5.25-7.0 (after one dip
# to 3.75 at 66k) to the end of its 500k (3 seeds, `peer_rejax.py ppo --env Breakout-MinAtar
# --seeds 3 --target 1000`). 5 is a score every rejax seed reaches and holds, and jaxsim's preset
# reaches too (by 24.6k steps, 3 seeds; agents/presets.py); random play scores 0.41.
BREAKOUT_TARGET = 5.0


@dataclasses.dataclass(frozen=True)
class RejaxCase:
    """One rejax comparison: both sides on one environment, to one target, every seed at once."""

    algorithm: str
    """"ppo" or "dqn": jaxsim's agent and rejax's algorithm."""
    env_id: str
    """jaxsim's id (its `agents.presets` preset for it)."""
    peer_env: str
    """rejax's (gymnax's) id: peer_rejax.py's --env, which picks its published settings."""
    target: float
    """The confirmed evaluation return both sides train to."""
    jaxsim_overrides: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Applied to jaxsim's preset (only how often the stop check runs, never the learning)."""
    smoke_steps: int = 2048
    """jaxsim's budget in --smoke (env steps per seed)."""
    peer_smoke_steps: int = 2500
    """rejax's budget in --smoke."""


CASES: dict[str, RejaxCase] = {
    "rejax_ppo": RejaxCase("ppo", "CartPole-v1", "CartPole-v1", CARTPOLE_TARGET),
    "rejax_dqn": RejaxCase("dqn", "CartPole-v1", "CartPole-v1", CARTPOLE_TARGET),
    # gymnax's Breakout-MinAtar on both sides (jaxsim through its gymnax adapter). jaxsim's stop
    # check every 8 updates of its preset (16 envs x 64 steps) = 8,192 env steps per seed,
    # rejax's eval_freq here: the preset's own 50 (51,200 steps) is coarser than rejax's.
    "rejax_ppo_breakout": RejaxCase(
        "ppo",
        "gymnax/Breakout-MinAtar",
        "Breakout-MinAtar",
        BREAKOUT_TARGET,
        jaxsim_overrides={"log_every": 8},
        smoke_steps=8192,
        peer_smoke_steps=8192,
    ),
}


def peer_args(case: RejaxCase, seeds: int, smoke: bool) -> list[str]:
    """peer_rejax.py's arguments for `case`: rejax's published settings for its environment."""
    args = [case.algorithm, "--env", case.peer_env, "--seeds", str(seeds)]
    args += ["--target", str(case.target)]
    return args + (["--total-timesteps", str(case.peer_smoke_steps)] if smoke else [])


def peer_summary(result: dict[str, Any], seeds: int) -> dict[str, Any]:
    """rejax's training wall per seed to the target (every seed at once: the last seed's solve
    over the seeds), the same without its first chunk (which holds its compile and its first
    eval_freq steps: a bound on the compile), and with its init added (`init_s`: the jitted
    init_state and its compile, which its training wall leaves out and jaxsim's holds; None in
    records from before it was kept); None where a seed did not solve."""
    solved_all = all(result["solved"])
    last = max((s["train_wall_s"] for s in result["solved_at"] if s), default=None)
    init_s = result.get("init_s")
    return {
        "train_wall_s_per_seed": last / seeds if solved_all else None,
        "train_wall_s_per_seed_without_first_chunk": (
            (last - result["first_chunk_s"]) / seeds if solved_all else None
        ),
        "train_wall_s_per_seed_init_in": (
            (last + init_s) / seeds if solved_all and init_s is not None else None
        ),
    }
