"""What the rollout-throughput suite's adapters share: its settings and what a timed run returns."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

import jaxsim
from benchmarks.harness.timing import Timing

ENV_ID = "CartPole-v1"
ENV_IDS = ("CartPole-v1", "Pendulum-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Acrobot-v1")


@dataclasses.dataclass(frozen=True)
class Config:
    num_envs: tuple[int, ...]
    repeats: int
    min_time: float
    steps_per_call: int  # env-steps per call (n * num_envs) for jaxsim and the physics floor
    quick: bool
    impls: tuple[str, ...]
    envs: tuple[str, ...] = (ENV_ID,)
    gymnax_scan_steps: int = 1000  # as BASELINES.md; capped so a call's records stay in memory
    gymnax_max_steps_per_call: int = 2**22
    gymnasium_steps_per_call: int = 256  # env-steps per call (>= 1 vector step)
    sync_max_envs: int = 4096  # SyncVectorEnv steps one Python env at a time: 65536 is too slow
    async_max_envs: int = 16  # one process per env: more than a few per core measures contention
    torch_steps_per_call: int = 2**16  # env-steps per call, 16 to 1024 steps
    # Intra-op threads for the PyTorch baseline (0: torch's default, one per core). One, as
    # jaxsim's scan uses about one core; torch's default collapses when other processes load
    # the cores (measured 20x slower at N=4096 on 2 busy cores).
    torch_threads: int = 1

    def scan_steps(self, num_envs: int) -> int:
        return max(32, self.steps_per_call // num_envs)


@dataclasses.dataclass
class Measured:
    """What an implementation's bench function hands back for one batch size."""

    timing: Timing
    steps_per_call: int
    checks: dict[str, Any]
    setup_s: float | None = None
    notes: dict[str, Any] | None = None


def record_check(checks: dict[str, Any], name: str, ok: bool, value: Any = None) -> None:
    """Records a named correctness check in `checks`; raises AssertionError if it failed."""
    if isinstance(value, tuple):
        value = list(value)
    checks[name] = {"pass": bool(ok), "value": value}
    if not ok:
        raise AssertionError(f"correctness check {name!r} failed: {value!r}")


def observation_size(env_id: str) -> int:
    env = jaxsim.make(env_id)
    return int(np.prod(env.observation_space(env.default_params).shape))
