"""What the fused kernel costs to compile for sm_90, per family: the record `backend="auto"` reads.

Measured by `python -m benchmarks.gpu.hopper_compile` (Triton 3.6.0 and its ptxas, on a CPU: no
GPU needed; `RECORD` names its runs) at `FusedConfig()`'s defaults, 256 environments per block
and 4 warps. A family is an environment (its id and static config) and a policy kind; an MLP is an
actor-critic of given hidden widths (the benchmarks' 64x64, the tests' 16x16). `backend="auto"`
runs the kernel only for a family whose kernel compiled within `FAST_COMPILE_S` CPU-seconds,
spilling at most `MAX_SPILL_BYTES` per thread and fitting sm_90's shared memory, and only for an
MLP no wider than one measured; anything unmeasured runs the scan. Pallas-free: `import jaxsim`
loads it.
"""

from __future__ import annotations

import dataclasses

from jaxsim.policies import MLPPolicy, OpenLoopPolicy, RandomPolicy

RECORD = "benchmarks/results/hopper_compile_cpu2_vm.json"
# A first GPU rollout should not wait longer than this for its kernel (CPU-seconds of Triton's
# pipeline and ptxas); the scan compiles in seconds.
FAST_COMPILE_S = 10.0
# A KiB or two of spills per thread stays in L1; the ~180 KB of an MLP's unrolled dots at 256
# environments per block and 4 warps is a kernel running from local memory.
MAX_SPILL_BYTES = 4096
SM90_MAX_SHARED_BYTES = 227 * 1024  # per block (H100, H200): a kernel asking more cannot launch
MEASURED_CONFIG = "FusedConfig(block_envs=256, num_warps=4)"


@dataclasses.dataclass(frozen=True)
class Measured:
    """One family's kernel at `FusedConfig()`'s defaults, compiled for sm_90 (from `RECORD`)."""

    status: str  # "ok"; "timed_out" (compile_s is the bound reached); "failed" (Triton failed)
    compile_s: float  # CPU-seconds of Triton's stages and ptxas; a lower bound when timed out
    spill_bytes: int | None = None  # ptxas spill stores per thread; None unless ok
    shared_bytes: int | None = None  # shared memory per block; None unless ok
    tuned: str | None = None  # where the default is slow: a config the sweep found fast

    @property
    def fast(self) -> bool:
        if self.status != "ok" or self.spill_bytes is None or self.shared_bytes is None:
            return False
        fits = self.shared_bytes <= SM90_MAX_SHARED_BYTES
        return fits and self.compile_s <= FAST_COMPILE_S and self.spill_bytes <= MAX_SPILL_BYTES

    def describe(self) -> str:
        """Why it is slow, in words (a measured fast family needs none)."""
        if self.status == "timed_out":
            said = f"did not compile within {self.compile_s:g} CPU-s"
        elif self.status == "failed":
            said = "failed to compile in Triton 3.6"
        elif self.shared_bytes is not None and self.shared_bytes > SM90_MAX_SHARED_BYTES:
            said = f"needs {self.shared_bytes} B of shared memory, more than a block has"
        elif self.spill_bytes:
            said = f"compiles in {self.compile_s:.0f} CPU-s, spilling {self.spill_bytes} B"
        else:
            said = f"compiles in {self.compile_s:.0f} CPU-s"
        hint = f"; {self.tuned} compiles fast with backend='fused'" if self.tuned else ""
        return f"its kernel at {MEASURED_CONFIG} {said} for sm_90{hint}"


# (environment family, policy kind, an MLP's hidden widths) -> its kernel at the defaults.
# Regenerate the rows with `python -m benchmarks.gpu.hopper_compile --table RECORD`.
MEASURED: dict[tuple[str, str, tuple[int, ...]], Measured] = {
    ("Acrobot-v1", "mlp", (16, 16)): Measured("ok", 6.0, spill_bytes=556, shared_bytes=19776),
    ("Acrobot-v1", "mlp", (64, 64)): Measured("ok", 38.2, spill_bytes=186808, shared_bytes=103680),
    ("Acrobot-v1", "open_loop", ()): Measured("ok", 1.8, spill_bytes=0, shared_bytes=1024),
    ("Acrobot-v1", "random", ()): Measured("ok", 1.9, spill_bytes=0, shared_bytes=1024),
    ("CartPole-v1", "mlp", (16, 16)): Measured("ok", 1.9, spill_bytes=40, shared_bytes=19136),
    ("CartPole-v1", "mlp", (64, 64)): Measured(
        "ok",
        29.0,
        spill_bytes=182088,
        shared_bytes=101120,
        tuned="FusedConfig(block_envs=128, num_warps=8)",
    ),
    ("CartPole-v1", "open_loop", ()): Measured("ok", 0.4, spill_bytes=0, shared_bytes=1024),
    ("CartPole-v1", "random", ()): Measured("ok", 0.5, spill_bytes=0, shared_bytes=1024),
    ("MinAtar/Asterix-v0(minimal_action_set=False)", "mlp", (64, 64)): Measured("timed_out", 120.0),
    ("MinAtar/Asterix-v0(minimal_action_set=False)", "open_loop", ()): Measured(
        "ok", 12.2, spill_bytes=0, shared_bytes=1024
    ),
    ("MinAtar/Asterix-v0(minimal_action_set=False)", "random", ()): Measured(
        "ok",
        11.9,
        spill_bytes=0,
        shared_bytes=1024,
        tuned="FusedConfig(block_envs=128, num_warps=4)",
    ),
    ("MinAtar/Breakout-v0(minimal_action_set=False)", "mlp", (64, 64)): Measured(
        "timed_out", 120.0
    ),
    ("MinAtar/Breakout-v0(minimal_action_set=False)", "open_loop", ()): Measured(
        "ok", 1.1, spill_bytes=0, shared_bytes=1024
    ),
    ("MinAtar/Breakout-v0(minimal_action_set=False)", "random", ()): Measured(
        "ok", 1.3, spill_bytes=0, shared_bytes=1024
    ),
    ("MinAtar/Freeway-v0(minimal_action_set=False)", "mlp", (64, 64)): Measured("timed_out", 120.0),
    ("MinAtar/Freeway-v0(minimal_action_set=False)", "open_loop", ()): Measured(
        "ok", 16.2, spill_bytes=716, shared_bytes=1024
    ),
    ("MinAtar/Freeway-v0(minimal_action_set=False)", "random", ()): Measured(
        "ok", 16.8, spill_bytes=828, shared_bytes=1024
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
        "ok", 9.1, spill_bytes=268, shared_bytes=1024
    ),
    ("MinAtar/SpaceInvaders-v0(minimal_action_set=False)", "random", ()): Measured(
        "ok", 9.2, spill_bytes=260, shared_bytes=1024
    ),
    ("MountainCar-v0", "mlp", (16, 16)): Measured("ok", 1.5, spill_bytes=8, shared_bytes=19008),
    ("MountainCar-v0", "mlp", (64, 64)): Measured(
        "ok", 35.7, spill_bytes=180444, shared_bytes=100608
    ),
    ("MountainCar-v0", "open_loop", ()): Measured("ok", 0.3, spill_bytes=0, shared_bytes=1024),
    ("MountainCar-v0", "random", ()): Measured("ok", 0.3, spill_bytes=0, shared_bytes=1024),
    ("MountainCarContinuous-v0", "mlp", (16, 16)): Measured(
        "ok", 1.2, spill_bytes=56, shared_bytes=18816
    ),
    ("MountainCarContinuous-v0", "mlp", (64, 64)): Measured(
        "ok", 29.5, spill_bytes=180280, shared_bytes=99840
    ),
    ("MountainCarContinuous-v0", "open_loop", ()): Measured(
        "ok", 0.3, spill_bytes=0, shared_bytes=1024
    ),
    ("MountainCarContinuous-v0", "random", ()): Measured(
        "ok", 0.4, spill_bytes=0, shared_bytes=1024
    ),
    ("Pendulum-v1", "mlp", (16, 16)): Measured("ok", 1.8, spill_bytes=48, shared_bytes=19072),
    ("Pendulum-v1", "mlp", (64, 64)): Measured(
        "ok",
        28.9,
        spill_bytes=180076,
        shared_bytes=100864,
        tuned="FusedConfig(block_envs=128, num_warps=8)",
    ),
    ("Pendulum-v1", "open_loop", ()): Measured("ok", 0.4, spill_bytes=0, shared_bytes=1024),
    ("Pendulum-v1", "random", ()): Measured("ok", 0.6, spill_bytes=0, shared_bytes=1024),
    ("Swarm-v0(num_particles=1024)", "random", ()): Measured("failed", 1.4),
    ("Swarm-v0(num_particles=16)", "random", ()): Measured(
        "failed", 1.1, tuned="FusedConfig(block_envs=128, num_warps=4)"
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


def compile_reason(env, policy) -> str | None:
    """Why the record says `backend="auto"` should not compile the kernel for `env` and
    `policy` on a GPU (slow, spilling, failing, or never measured), or None if it compiles fast.

    An MLP is judged by the narrowest measured MLP at least as wide in every layer (compile
    time grows with the widths: Triton unrolls its float32 dots into FMAs).
    """
    family, kind = env_family(env), policy_kind(policy)
    name = type(policy).__name__
    if kind == "mlp":
        covering = [
            (sum(hidden), measured)
            for (env_key, policy_key, hidden), measured in MEASURED.items()
            if (env_key, policy_key) == (family, kind) and _within(policy, hidden)
        ]
        measured = min(covering, key=lambda wm: wm[0])[1] if covering else None
    else:
        measured = MEASURED.get((family, kind, ()))
    if measured is None:
        size = " this wide" if kind == "mlp" else ""
        return f"no compile record for {family} with a {name}{size} ({RECORD})"
    if not measured.fast:
        return f"{family} with a {name}: {measured.describe()} ({RECORD})"
    return None
