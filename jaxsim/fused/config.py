"""`FusedConfig`: the fused backend's tuning knobs, static and validated."""

from __future__ import annotations

import dataclasses

import jax

_MAX_BLOCK_ENVS = 2**16
_MAX_STEPS_PER_LAUNCH = 2**20
_NUM_WARPS = (1, 2, 4, 8, 16, 32)


def is_power_of_two(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1 and x & (x - 1) == 0


@dataclasses.dataclass(frozen=True)
class FusedConfig:
    """Tuning of the fused backend; static (part of the compile-cache key).

    Attributes:
      block_envs: environments per kernel program, a power of two in [1, 65536]. On a GPU each
        program is one thread block; 32 * num_warps lanes or more keeps every thread busy.
      steps_per_launch: K, environment steps per kernel launch, in [1, 2**20]. The state goes to
        and from device memory once per launch, so larger K moves less; a rollout of n steps
        makes ceil(n / K) launches, the last one shorter when K does not divide n.
      num_warps: warps per program on a GPU (Triton), one of 1, 2, 4, 8, 16, 32.
      interpret: run the kernel in Pallas interpret mode. None: interpret unless jax's default
        backend is a GPU (on a CPU interpret mode is the only way; it checks, it is not fast).
    """

    block_envs: int = 256
    steps_per_launch: int = 64
    num_warps: int = 4
    interpret: bool | None = None

    def __post_init__(self):
        if not (is_power_of_two(self.block_envs) and self.block_envs <= _MAX_BLOCK_ENVS):
            raise ValueError(
                f"FusedConfig: block_envs must be a power of two in [1, {_MAX_BLOCK_ENVS}], "
                f"got {self.block_envs!r}"
            )
        k = self.steps_per_launch
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= _MAX_STEPS_PER_LAUNCH:
            raise ValueError(
                f"FusedConfig: steps_per_launch must be an integer in [1, {_MAX_STEPS_PER_LAUNCH}]"
                f", got {k!r}"
            )
        if self.num_warps not in _NUM_WARPS:
            raise ValueError(
                f"FusedConfig: num_warps must be one of {_NUM_WARPS}, got {self.num_warps!r}"
            )
        if self.interpret not in (None, True, False):
            raise ValueError(
                f"FusedConfig: interpret must be None or a bool, got {self.interpret!r}"
            )

    def resolved_interpret(self) -> bool:
        return jax.default_backend() != "gpu" if self.interpret is None else self.interpret
