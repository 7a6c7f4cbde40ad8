"""The SBX case: time to solve per seed, whole processes as users run them, beside SBX.

jaxsim: one `python -m agents.train <algorithm> --env <id> --seeds N` process (its preset, seeds
trained at once, a seed stopped once an independent evaluation confirms it), with a fresh
compilation cache folder (cold), then again with the folder it filled (warm); its time per seed
is the process's wall time / N, from start to exit, imports and evaluations in. SBX: one
`benchmarks/peers/peer_sbx.py` process per seed under the sbx venv (rl-zoo's settings and budget,
the same stop rule), timed the same way, its per-seed time the mean of the processes'.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.baselines.offpolicy_sb3 import RL_ZOO
from benchmarks.harness.timing import train_command, train_process

# case -> (algorithm, Gymnasium id, target return)
CASES = {
    "sbx_ppo": ("ppo", "CartPole-v1", 475.0),
    "sbx_dqn": ("dqn", "CartPole-v1", 475.0),
    "sbx_sac": ("sac", "Pendulum-v1", -200.0),
}
# SBX's stop check: env steps between checks, episodes per check. PPO and DQN: jaxsim's presets'
# own cadence (log_every x steps per update: 1,024 and 2,048) and episodes (32); SAC: every
# 1,000 steps, 10 episodes, as the offpolicy_solve suite checks SB3's SAC.
SBX_CHECKS = {"ppo": (1024, 32), "dqn": (2048, 32), "sac": (1000, 10)}
SMOKE_STEPS = 2048


def jaxsim_side(case: str, seeds: int, smoke: bool) -> dict[str, Any]:
    """Cold (fresh compilation cache), then warm (the cache the cold run filled)."""
    algorithm, env_id, target = CASES[case]
    budget = SMOKE_STEPS if smoke else None
    runs = {}
    with tempfile.TemporaryDirectory(prefix="jaxsim-peers-sbx-") as tmp:
        cache = str(Path(tmp) / "xla")
        for label in ("cold",) if smoke else ("cold", "warm"):
            out = Path(tmp) / label
            flags = ["--seeds", seeds, "--target-return", target, "--overwrite"]
            flags += ["--total-steps", budget] if budget else []
            cmd = train_command(algorithm, env_id, out, cache, *flags)
            runs[label] = train_process(cmd, seeds, out)
    return runs


def sbx_settings(algorithm: str, env_id: str) -> dict[str, Any]:
    """rl-zoo's settings for the pair, the SB3 baselines' (`offpolicy_sb3.RL_ZOO`), as
    peer_sbx.py takes them: PPO CartPole's learning rate and clip range, which
    `ppo_sb3.sb3_cartpole_ppo` decays linearly to 0, written ["lin", x]."""
    h = dict(RL_ZOO[algorithm, env_id])
    if (algorithm, env_id) == ("ppo", "CartPole-v1"):
        h.update(learning_rate=["lin", h["learning_rate"]], clip_range=["lin", h["clip_range"]])
    return h


def sbx_args(case: str, seed: int, smoke: bool) -> list[str]:
    """peer_sbx.py's arguments for one seed of `case`."""
    algorithm, env_id, target = CASES[case]
    every, episodes = SBX_CHECKS[algorithm]
    args = [algorithm, "--env", env_id, "--seed", str(seed), "--target", str(target)]
    args += ["--settings", json.dumps(sbx_settings(algorithm, env_id))]
    args += ["--eval-every", str(min(every, SMOKE_STEPS // 2) if smoke else every)]
    args += ["--episodes", str(2 if smoke else episodes)]
    return args + (["--total-timesteps", str(SMOKE_STEPS)] if smoke else [])


def sbx_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per seed: solved by the rule, the process's wall time; their mean when all solved."""
    solved = [bool(r["solved"]) for r in runs]
    walls = [r["outer_wall_s"] for r in runs]
    return {
        "solved_per_seed": solved,
        "solved_all": all(solved),
        "process_wall_s_per_seed": walls,
        "per_seed_wall_s": statistics.mean(walls) if all(solved) else None,
        "steps_to_target_per_seed": [r["steps_to_target"] for r in runs],
        "train_wall_s_to_target_per_seed": [r["train_wall_s_to_target"] for r in runs],
    }
