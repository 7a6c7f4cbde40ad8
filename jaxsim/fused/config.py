"""What the fused backend takes: `FusedConfig` (its tuning knobs, static and validated) and its
refusals (`unsupported_reason`: which environments and policies the kernel runs, and why not;
`auto_backend`: where `backend="auto"` runs the kernel). Pallas-free: `import jaxsim` loads it."""

from __future__ import annotations

import dataclasses
import logging

import jax

from jaxsim.contract import block_reason
from jaxsim.core import Env
from jaxsim.fused.compile_record import compile_reason, default_tuning
from jaxsim.policies import MLPPolicy, OpenLoopPolicy, RandomPolicy
from jaxsim.spaces import Box, Discrete

_MAX_BLOCK_ENVS = 2**16
_MAX_STEPS_PER_LAUNCH = 2**20
_NUM_WARPS = (1, 2, 4, 8, 16, 32)


def is_power_of_two(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1 and x & (x - 1) == 0


@dataclasses.dataclass(frozen=True)
class FusedConfig:
    """Tuning of the fused backend; static (part of the compile-cache key). A rollout given no
    config runs at `FusedConfig.for_family(env, policy)`: these defaults with the block size
    and warps the compile record measured best for the family.

    Attributes:
      block_envs: environments per kernel program, a power of two in [1, 65536]. On a GPU each
        program is one thread block; 32 * num_warps lanes or more keeps every thread busy.
      steps_per_launch: K, environment steps per kernel launch, in [1, 2**20]. The state goes to
        and from device memory once per launch, so larger K moves less; a rollout of n steps
        makes ceil(n / K) launches, the last one shorter when K does not divide n.
      num_warps: warps per program on a GPU (Triton), one of 1, 2, 4, 8, 16, 32.
      interpret: run the kernel in Pallas interpret mode. None: interpret unless jax's default
        backend is a GPU (on a CPU interpret mode is the only way; it checks, it is not fast).
      mlp_first_layer: how an `MLPPolicy`'s first layers read the observation
        (`jaxsim.fused.block.MLPBlock`): "dot" (one [block, obs_dim] operand and a matmul, as
        the scan backend: bit for bit with it in its actions on a CPU), "columns" (a sum of
        each component's contribution `obs_i[:, None] * W[i]`) or "chunks" (a dot per 16
        components); the last two float32 rounding apart from "dot". "dot" by default: the
        others measured no better for sm_90 (benchmarks/results/hopper_compile_cpu2_vm.json;
        for MinAtar's MLPs, all three miss issue 41's targets).
    """

    block_envs: int = 256
    steps_per_launch: int = 64
    num_warps: int = 4
    interpret: bool | None = None
    mlp_first_layer: str = "dot"

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
        if self.mlp_first_layer not in ("dot", "columns", "chunks"):
            raise ValueError(
                "FusedConfig: mlp_first_layer must be 'dot', 'columns' or 'chunks', got "
                f"{self.mlp_first_layer!r}"
            )

    @classmethod
    def for_family(cls, env, policy) -> FusedConfig:
        """The configuration a rollout of `env` with `policy` runs at when given none: the
        block size and warps the compile record chose for their family (`compile_record.
        default_tuning`: no spills, shared memory and compile time within the targets), else
        the defaults above."""
        block_envs, num_warps = default_tuning(env, policy)
        return cls(block_envs=block_envs, num_warps=num_warps)

    def resolved_interpret(self) -> bool:
        return jax.default_backend() != "gpu" if self.interpret is None else self.interpret


# ------------------------------------------------------------------------------ what can run fused
def env_unsupported_reason(env: Env) -> str | None:
    """Why `env` cannot run in the fused kernel, or None if it can: checked on the environment
    itself (its draws, its overrides, its spaces, and its functions traced on a block of lanes),
    once per class and static config."""
    cache_key = (type(env), env._config_overrides)
    if cache_key not in _REASONS:
        _REASONS[cache_key] = _env_reason(env)
    return _REASONS[cache_key]


_REASONS: dict = {}


def _env_reason(env: Env) -> str | None:
    params = env.default_params  # shapes and dtypes never depend on params values
    name = type(env).__name__
    for which in ("reset", "step"):
        if getattr(env.draws, f"{which}_key"):
            return (
                f"{name}'s {which} draws from a PRNG key (Draws({which}='key')); the kernel draws "
                f"counter-based uniforms only: declare Draws({which}=n) and take n uniforms"
            )
    for method in ("step", "observe", "reset_at"):
        if getattr(type(env), method) is not getattr(Env, method):
            return (
                f"{name} overrides Env.{method}; the kernel evaluates init_state, dynamics and "
                "obs_fields on blocks and would not see the override"
            )
    space = env.action_space(params)
    if not isinstance(space, Discrete | Box):
        return f"its action space {space!r} is neither Discrete nor Box"
    state = env.state_template()
    shapes = {tuple(leaf.shape) for leaf in jax.tree.leaves(state)}
    shapes |= set(env.reset_uniform_shapes()) | set(env.step_uniform_shapes())
    bad = sorted(s for s in shapes if not all(is_power_of_two(d) for d in s))
    if bad:
        return (
            f"{name}'s state, reset or step uniforms have shapes {bad}; the kernel holds each as a "
            "[block, *shape] array, which Triton lowers only for power-of-two sizes"
        )
    return block_reason(env)


def policy_unsupported_reason(policy) -> str | None:
    """Why `policy` cannot run in the fused kernel, or None if it can."""
    if isinstance(policy, RandomPolicy | OpenLoopPolicy):
        return None
    if not callable(getattr(policy, "act_from_seed", None)):
        return (
            f"a {type(policy).__name__} is opaque to the kernel; it runs RandomPolicy, MLPPolicy, "
            "OpenLoopPolicy, or a pytree policy with an elementwise act_from_seed(seed, index, obs)"
        )
    leaves = jax.tree.leaves(policy)
    if not all(isinstance(leaf, jax.Array) for leaf in leaves):
        kinds = sorted({type(leaf).__name__ for leaf in leaves})
        return f"the kernel takes a policy's leaves as array inputs, but they include {kinds}"
    return None


def unsupported_reason(env, policy=None) -> str | None:
    """Why the fused backend cannot run `env` with `policy` (None: with the kernel's own
    policies), or None if it can."""
    reason = env_unsupported_reason(env)
    if reason is not None:
        return f"environment {env.id}: {reason}"
    reason = None if policy is None else policy_unsupported_reason(policy)
    return None if reason is None else f"policy: {reason}"


def refusal(reason: str) -> str:
    """The error a fused rollout that cannot run raises, `reason` from `unsupported_reason`."""
    return (
        f"rollout: the fused backend cannot run this rollout ({reason}); "
        "use backend='scan', which runs any environment and policy"
    )


def auto_backend(env, policy) -> str:
    """What `backend="auto"` runs: "fused" on a GPU where the kernel compiles fast, else "scan".

    On a CPU the kernel only runs interpreted, far slower than the scan. On a GPU: "fused" for
    `RandomPolicy`, `OpenLoopPolicy` and `MLPPolicy` (whose Triton lowering the tests check for
    every environment), unless the action space is a Box of a size that is not a power of two
    (an action is an array of that size, which Triton does not lower), and only for a family
    whose kernel the compile record (`jaxsim.fused.compile_record`: sm_90, at the family's
    default configuration, `FusedConfig.for_family`) shows meeting issue 41's targets: no
    spills, at most 100 KiB of shared memory, compiled within 20 CPU-seconds (60 for a MinAtar
    game; no MinAtar MLP does, for instance). Any other policy with
    `act_from_seed` runs fused only when asked for explicitly. `auto_reason` says why the scan;
    on a GPU it is logged once per reason (logger "jaxsim.fused").
    """
    reason = auto_reason(env, policy)
    if reason is None:
        return "fused"
    if jax.default_backend() == "gpu" and reason not in _LOGGED:
        _LOGGED.add(reason)
        logging.getLogger("jaxsim.fused").info("backend='auto' runs the scan: %s", reason)
    return "scan"


_LOGGED: set[str] = set()


def auto_reason(env, policy) -> str | None:
    """Why `backend="auto"` runs the scan for `env` and `policy`, or None where it runs the
    fused kernel (`auto_backend`)."""
    if jax.default_backend() != "gpu":
        return "jax's default backend is not a GPU: the kernel would run interpreted"
    reason = unsupported_reason(env, policy)
    if reason is not None:
        return reason
    if not (isinstance(policy, RandomPolicy | OpenLoopPolicy) or type(policy) is MLPPolicy):
        return (
            f"a {type(policy).__name__} runs fused only when asked for (backend='fused'): "
            "auto takes RandomPolicy, OpenLoopPolicy and MLPPolicy"
        )
    space = env.action_space(env.default_params)
    if isinstance(space, Box) and not is_power_of_two(space.size):
        return f"its actions are a Box of {space.size} components, which Triton does not lower"
    return compile_reason(env, policy)
