"""What the fused kernel costs to compile for sm_90, per family: the record `backend="auto"` reads,
and the block size and warps a family's kernel runs at by default.

Measured by `python -m benchmarks.gpu.hopper_compile` (Triton 3.6.0 and its ptxas, on a CPU: no
GPU needed; `RECORD` names its runs). A family is an environment (its id and static config) and
a policy kind; an MLP is an actor-critic of given hidden widths (the benchmarks' 64x64, the
tests' 16x16). Each family's entry is its kernel at the configuration it runs at when a rollout
gives no `fused_config` (`default_tuning`): of the configurations measured, the one meeting the
targets below with the most environments per block (then the quickest to compile), else
`FusedConfig()`'s (256 environments, 4 warps). The targets (issue 41): no spills, at most
`MAX_SHARED_BYTES` of shared memory, and at most `compile_budget_s` CPU-seconds (20 for a
classic-control or Swarm kernel, 60 for a MinAtar game's). `backend="auto"` runs the kernel
only for a family that meets them, and only for an MLP no wider than one measured; anything
unmeasured runs the scan. Pallas-free: `import jaxsim` loads it.
"""

from __future__ import annotations

import dataclasses

from jaxsim.policies import MLPPolicy, OpenLoopPolicy, RandomPolicy

RECORD = "benchmarks/results/hopper_compile_cpu2_vm.json"
# A kernel that spills runs from local memory; the targets allow none.
MAX_SPILL_BYTES = 0
# Shared memory per block: 100 KiB leaves room for two blocks per SM on an H100 / H200 (227 KiB).
MAX_SHARED_BYTES = 100 * 1024
DEFAULT_TUNING = (256, 4)  # FusedConfig()'s block_envs and num_warps


def compile_budget_s(family: str) -> float:
    """CPU-seconds a family's kernel may take to compile (Triton's stages and ptxas): what a
    first GPU rollout waits for; the scan compiles in seconds."""
    return 60.0 if family.startswith("MinAtar/") else 20.0


@dataclasses.dataclass(frozen=True)
class Measured:
    """One family's kernel at one configuration, compiled for sm_90 (from `RECORD`)."""

    status: str  # "ok"; "timed_out" (compile_s is the bound reached); "failed" (Triton failed)
    compile_s: float  # CPU-seconds of Triton's stages and ptxas; a lower bound when timed out
    spill_bytes: int | None = None  # ptxas spill stores per thread; None unless ok
    shared_bytes: int | None = None  # shared memory per block; None unless ok
    block_envs: int = DEFAULT_TUNING[0]  # the configuration measured: the family's default
    num_warps: int = DEFAULT_TUNING[1]

    @property
    def config(self) -> str:
        return f"FusedConfig(block_envs={self.block_envs}, num_warps={self.num_warps})"

    def meets_targets(self, family: str) -> bool:
        if self.status != "ok" or self.spill_bytes is None or self.shared_bytes is None:
            return False
        return (
            self.compile_s <= compile_budget_s(family)
            and self.spill_bytes <= MAX_SPILL_BYTES
            and self.shared_bytes <= MAX_SHARED_BYTES
        )

    def describe(self) -> str:
        """What the record says of it, in words (why `auto` runs the scan)."""
        if self.status == "timed_out":
            said = f"did not compile within {self.compile_s:g} CPU-s"
        elif self.status == "failed":
            said = "failed to compile in Triton 3.6"
        elif self.shared_bytes is not None and self.shared_bytes > MAX_SHARED_BYTES:
            said = f"compiles in {self.compile_s:.0f} CPU-s but needs {self.shared_bytes} B of "
            said += "shared memory"
        elif self.spill_bytes:
            said = f"compiles in {self.compile_s:.0f} CPU-s, spilling {self.spill_bytes} B"
        else:
            said = f"compiles in {self.compile_s:.0f} CPU-s"
        return f"its kernel at {self.config} {said} for sm_90"


# (environment family, policy kind, an MLP's hidden widths) -> its kernel at the defaults.
# Regenerate the rows with `python -m benchmarks.gpu.hopper_compile --table RECORD`.
MEASURED: dict[tuple[str, str, tuple[int, ...]], Measured] = {
    ("Acrobot-v1", "mlp", (16, 16)): Measured(
        "ok", 2.8, spill_bytes=0, shared_bytes=11584, block_envs=128, num_warps=8
    ),
    ("Acrobot-v1", "mlp", (64, 64)): Measured(
        "ok", 3.2, spill_bytes=0, shared_bytes=46336, block_envs=32, num_warps=8
    ),
    ("Acrobot-v1", "open_loop", ()): Measured("ok", 1.9, spill_bytes=0, shared_bytes=1024),
    ("Acrobot-v1", "random", ()): Measured("ok", 2.4, spill_bytes=0, shared_bytes=1024),
    ("CartPole-v1(hide_velocity=False)", "mlp", (16, 16)): Measured(
        "ok", 1.0, spill_bytes=0, shared_bytes=19136, block_envs=256, num_warps=16
    ),
    ("CartPole-v1(hide_velocity=False)", "mlp", (64, 64)): Measured(
        "ok", 1.5, spill_bytes=0, shared_bytes=51968, block_envs=64, num_warps=16
    ),
    ("CartPole-v1(hide_velocity=False)", "open_loop", ()): Measured(
        "ok", 0.5, spill_bytes=0, shared_bytes=1024
    ),
    ("CartPole-v1(hide_velocity=False)", "random", ()): Measured(
        "ok", 0.6, spill_bytes=0, shared_bytes=1024
    ),
    ("MinAtar/Asterix-v0(minimal_action_set=False)", "mlp", (64, 64)): Measured("timed_out", 120.0),
    ("MinAtar/Asterix-v0(minimal_action_set=False)", "open_loop", ()): Measured(
        "ok", 11.6, spill_bytes=0, shared_bytes=1024
    ),
    ("MinAtar/Asterix-v0(minimal_action_set=False)", "random", ()): Measured(
        "ok", 12.6, spill_bytes=0, shared_bytes=1024
    ),
    ("MinAtar/Breakout-v0(minimal_action_set=False)", "mlp", (64, 64)): Measured(
        "timed_out", 120.0
    ),
    ("MinAtar/Breakout-v0(minimal_action_set=False)", "open_loop", ()): Measured(
        "ok", 1.3, spill_bytes=0, shared_bytes=1024
    ),
    ("MinAtar/Breakout-v0(minimal_action_set=False)", "random", ()): Measured(
        "ok", 1.3, spill_bytes=0, shared_bytes=1024
    ),
    ("MinAtar/Freeway-v0(minimal_action_set=False)", "mlp", (64, 64)): Measured("timed_out", 120.0),
    ("MinAtar/Freeway-v0(minimal_action_set=False)", "open_loop", ()): Measured(
        "ok", 15.3, spill_bytes=0, shared_bytes=16, block_envs=128, num_warps=4
    ),
    ("MinAtar/Freeway-v0(minimal_action_set=False)", "random", ()): Measured(
        "ok", 14.6, spill_bytes=0, shared_bytes=16, block_envs=128, num_warps=4
    ),
    ("MinAtar/Seaquest-v0(minimal_action_set=False)", "mlp", (64, 64)): Measured(
        "timed_out", 120.0
    ),
    ("MinAtar/Seaquest-v0(minimal_action_set=False)", "open_loop", ()): Measured(
        "timed_out", 120.0
    ),
    ("MinAtar/Seaquest-v0(minimal_action_set=False)", "random", ()): Measured("timed_out", 120.0),
    ("MinAtar/SpaceInvaders-v0(minimal_action_set=False)", "mlp", (64, 64)): Measured(
        "timed_out", 120.0
    ),
    ("MinAtar/SpaceInvaders-v0(minimal_action_set=False)", "open_loop", ()): Measured(
        "ok", 10.5, spill_bytes=0, shared_bytes=16, block_envs=128, num_warps=4
    ),
    ("MinAtar/SpaceInvaders-v0(minimal_action_set=False)", "random", ()): Measured(
        "ok", 11.7, spill_bytes=0, shared_bytes=16, block_envs=128, num_warps=4
    ),
    ("MountainCar-v0", "mlp", (16, 16)): Measured(
        "ok", 0.9, spill_bytes=0, shared_bytes=19008, block_envs=256, num_warps=16
    ),
    ("MountainCar-v0", "mlp", (64, 64)): Measured(
        "ok", 1.4, spill_bytes=0, shared_bytes=51456, block_envs=64, num_warps=16
    ),
    ("MountainCar-v0", "open_loop", ()): Measured("ok", 0.2, spill_bytes=0, shared_bytes=1024),
    ("MountainCar-v0", "random", ()): Measured("ok", 0.3, spill_bytes=0, shared_bytes=1024),
    ("MountainCarContinuous-v0", "mlp", (16, 16)): Measured(
        "ok", 0.8, spill_bytes=0, shared_bytes=18816, block_envs=256, num_warps=16
    ),
    ("MountainCarContinuous-v0", "mlp", (64, 64)): Measured(
        "ok", 1.5, spill_bytes=0, shared_bytes=50688, block_envs=64, num_warps=16
    ),
    ("MountainCarContinuous-v0", "open_loop", ()): Measured(
        "ok", 0.3, spill_bytes=0, shared_bytes=1024
    ),
    ("MountainCarContinuous-v0", "random", ()): Measured(
        "ok", 0.4, spill_bytes=0, shared_bytes=1024
    ),
    ("Pendulum-v1", "mlp", (16, 16)): Measured(
        "ok", 1.0, spill_bytes=0, shared_bytes=19072, block_envs=256, num_warps=16
    ),
    ("Pendulum-v1", "mlp", (64, 64)): Measured(
        "ok", 1.6, spill_bytes=0, shared_bytes=51712, block_envs=64, num_warps=16
    ),
    ("Pendulum-v1", "open_loop", ()): Measured("ok", 0.5, spill_bytes=0, shared_bytes=1024),
    ("Pendulum-v1", "random", ()): Measured("ok", 0.6, spill_bytes=0, shared_bytes=1024),
    ("Swarm-v0(num_particles=1024)", "random", ()): Measured("failed", 1.5),
    ("Swarm-v0(num_particles=16)", "random", ()): Measured(
        "ok", 2.9, spill_bytes=0, shared_bytes=2048, block_envs=128, num_warps=4
    ),
}


def env_family(env) -> str:
    """The environment's id and every field of its static config, e.g.
    "Swarm-v0(num_particles=16)": what fixes its kernel's shapes."""
    config = getattr(env, "config", None)
    fields = dataclasses.fields(config) if dataclasses.is_dataclass(config) else ()
    extra = ",".join(f"{f.name}={getattr(config, f.name)}" for f in fields)
    return f"{env.id}({extra})" if extra else env.id


def policy_kind(policy) -> str | None:
    """ "random", "open_loop", "mlp" (an `MLPPolicy` itself, not a subclass), or None."""
    if isinstance(policy, RandomPolicy):
        return "random"
    if isinstance(policy, OpenLoopPolicy):
        return "open_loop"
    return "mlp" if type(policy) is MLPPolicy else None


def _padded_hidden(layers) -> tuple[int, ...]:
    """Hidden widths as the kernel holds them: padded to powers of two (`block.pad_mlp`)."""
    return tuple(1 << max(w.shape[1] - 1, 0).bit_length() for w, _ in layers[:-1])


def _within(policy: MLPPolicy, hidden: tuple[int, ...]) -> bool:
    """No layer of `policy` (actor or critic) wider than the measured MLP's, and as many."""
    nets = [policy.actor] + ([] if policy.critic is None else [policy.critic])
    widths = [_padded_hidden(net) for net in nets]
    return all(len(w) == len(hidden) and all(map(int.__le__, w, hidden)) for w in widths)


def measured(env, policy) -> Measured | None:
    """The record's entry for `env`'s family and `policy`'s kind, or None if never measured.

    An MLP is judged by the narrowest measured MLP at least as wide in every layer (compile
    time grows with the widths: Triton unrolls its float32 dots into FMAs).
    """
    family, kind = env_family(env), policy_kind(policy)
    if kind != "mlp":
        return MEASURED.get((family, kind, ()))
    covering = [
        (sum(hidden), m)
        for (env_key, policy_key, hidden), m in MEASURED.items()
        if (env_key, policy_key) == (family, kind) and _within(policy, hidden)
    ]
    return min(covering, key=lambda wm: wm[0])[1] if covering else None


def default_tuning(env, policy) -> tuple[int, int]:
    """(block_envs, num_warps) a rollout of `env` with `policy` runs at when given no
    `fused_config`: its family's entry's (the measured configuration that meets the targets
    with the most environments per block), else `FusedConfig()`'s."""
    m = measured(env, policy)
    return DEFAULT_TUNING if m is None else (m.block_envs, m.num_warps)


def compile_reason(env, policy) -> str | None:
    """Why the record says `backend="auto"` should not compile the kernel for `env` and
    `policy` on a GPU (slow, spilling, too much shared memory, failing, or never measured), or
    None if its kernel at its default configuration meets the targets."""
    family, m = env_family(env), measured(env, policy)
    name = type(policy).__name__
    if m is None:
        size = " this wide" if policy_kind(policy) == "mlp" else ""
        return f"no compile record for {family} with a {name}{size} ({RECORD})"
    if not m.meets_targets(family):
        budget = compile_budget_s(family)
        targets = f"{budget:g} CPU-s, no spills, {MAX_SHARED_BYTES // 1024} KiB of shared memory"
        return f"{family} with a {name}: {m.describe()} (targets: {targets}; {RECORD})"
    return None
