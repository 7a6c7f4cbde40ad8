"""PPO to a solved CartPole as a user runs it: whole processes, jaxsim's command beside SB3's.

jaxsim: `python -m agents.train ppo --env CartPole-v1 --seeds 3 --no-plot --quiet` (the preset
stops each seed at 475 once an independent evaluation confirms it; every seed must be solved),
once with a fresh compilation cache folder (cold) and `repeats` times with the folder it filled
(warm); its time per seed is the process's wall time / 3. SB3: `python -m
benchmarks.baselines.ppo_sb3 --seed s` (rl-zoo's settings, the same checks), one process per seed,
with torch's default threads and with one. Every process starts from a fresh interpreter, imports
included; times are from start to exit.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from benchmarks.baselines.ppo_sb3 import sb3_process
from benchmarks.harness.timing import train_command, train_process


def jaxsim_process(seeds: int, cache_dir: str, out: Path) -> dict:
    """One `agents.train` process (the PPO preset: its target); `harness.timing.train_process`."""
    cmd = train_command("ppo", "CartPole-v1", out, cache_dir, "--seeds", seeds)
    return train_process(cmd, seeds, out)


def whole_process(seeds: int, sb3_seeds: dict[int, int], repeats: int) -> dict:
    """jaxsim cold, jaxsim warm x `repeats`, SB3 per seed ({torch threads (0: default): how
    many seeds}, empty: no SB3); ratios."""
    with tempfile.TemporaryDirectory(prefix="jaxsim-process-") as tmp:
        tmp = Path(tmp)
        cache = str(tmp / "xla")
        cold = jaxsim_process(seeds, cache, tmp / "cold")
        warm = [jaxsim_process(seeds, cache, tmp / f"warm{i}") for i in range(repeats)]
        result = {
            "command": "python -m agents.train ppo --env CartPole-v1 "
            f"--seeds {seeds} --no-plot --quiet",
            "jaxsim_cold": cold,
            "jaxsim_warm": warm,
            "jaxsim_cold_per_seed_s": cold["per_seed_wall_s"],
            "jaxsim_warm_per_seed_s": statistics.median(w["per_seed_wall_s"] for w in warm),
            "jaxsim_all_solved": cold["solved_all"] and all(w["solved_all"] for w in warm),
        }
        if not sb3_seeds:
            return {**result, "sb3": {"skipped": "--no-sb3"}}
        for threads, n in sb3_seeds.items():
            label = "sb3_default_threads" if threads == 0 else f"sb3_{threads}_thread"
            runs = [sb3_process(s, threads, tmp / f"sb3_{threads}_{s}.json") for s in range(n)]
            solved = [r["wall_s"] for r in runs if r["solved"]]
            median = statistics.median(solved) if solved else None
            # The same without SB3's checks (its evaluations are slow; jaxsim's keep theirs).
            lean = [r["wall_s"] - r["check_wall_s"] for r in runs if r["solved"]]
            result[label] = {
                "runs": runs,
                "seeds_solved": len(solved),
                "median_wall_s": median,
                "median_wall_s_excluding_checks": statistics.median(lean) if lean else None,
            }
            for cache_state in ("cold", "warm"):
                ours = result[f"jaxsim_{cache_state}_per_seed_s"]
                result[f"speedup_{cache_state}_vs_{label}"] = median / ours if median else None
                if lean:
                    result[f"speedup_{cache_state}_vs_{label}_excluding_its_checks"] = (
                        statistics.median(lean) / ours
                    )
    return result
