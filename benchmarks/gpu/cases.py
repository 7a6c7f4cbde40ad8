"""The kernels `benchmarks.gpu.hopper_compile` compiles: a `Case` (an environment with its static
config, a policy, `FusedConfig`'s tuning), the named sets of them (`CASE_SETS`: today's defaults,
the other families `backend="auto"` may run fused, the tuning sweep, a small quick look), and the
family `jaxsim.fused.compile_record` files a case under."""

from __future__ import annotations

import dataclasses
from typing import Any

POLICIES = ("random", "open_loop", "mlp")
MLP_HIDDEN = (64, 64)  # the benchmarks' actor-critic (benchmarks.fusion.measure)


@dataclasses.dataclass(frozen=True)
class Case:
    """One kernel: an environment (with static config), a policy, the kernel's tuning."""

    env_id: str
    policy: str  # "random", "open_loop" (actions as an input) or "mlp" (an actor-critic)
    block_envs: int = 256  # FusedConfig's defaults
    num_warps: int = 4
    steps_per_launch: int = 64
    make_kwargs: tuple[tuple[str, Any], ...] = ()
    outputs: str = "all"  # what the rollout keeps: "all" stores the most per step
    hidden: tuple[int, ...] = MLP_HIDDEN  # the MLP's hidden widths (actor and critic alike)
    mlp_first_layer: str = "dot"  # FusedConfig's: how the MLP's first layers read the obs

    def __post_init__(self):
        if self.policy not in POLICIES:
            raise ValueError(f"Case: policy must be one of {POLICIES}, got {self.policy!r}")

    @property
    def env_label(self) -> str:
        extra = ",".join(f"{k}={v}" for k, v in self.make_kwargs)
        return f"{self.env_id}({extra})" if extra else self.env_id

    @property
    def policy_label(self) -> str:
        if self.policy != "mlp":
            return self.policy
        label = "mlp" if self.hidden == MLP_HIDDEN else "mlp" + "x".join(map(str, self.hidden))
        return label if self.mlp_first_layer == "dot" else f"{label}/{self.mlp_first_layer}"

    @property
    def name(self) -> str:
        return f"{self.env_label}:{self.policy_label}:b{self.block_envs}:w{self.num_warps}"

    @classmethod
    def parse(cls, text: str) -> Case:
        """ENV[:POLICY[:BLOCK[:WARPS]]], e.g. "MinAtar/Breakout-v0:mlp:64:2"; an MLP's widths
        as "mlp16x16", its first layer as "mlp/chunks"; Swarm's size as "Swarm-v0@1024"."""
        env, policy, block, warps = [*text.split(":"), None, None, None][:4]
        kwargs: tuple = ()
        if "@" in env:
            env, size = env.split("@")
            kwargs = (("num_particles", int(size)),)
        policy = policy or "random"
        policy, _, first_layer = policy.partition("/")
        hidden = MLP_HIDDEN
        if policy.startswith("mlp") and policy != "mlp":
            policy, hidden = "mlp", tuple(int(w) for w in policy[3:].split("x"))
        return cls(
            env, policy, int(block or 256), int(warps or 4), make_kwargs=kwargs, hidden=hidden,
            mlp_first_layer=first_layer or "dot",
        )  # fmt: skip


def _swarm(n: int) -> tuple[tuple[str, Any], ...]:
    return (("num_particles", n),)


MINATAR = tuple(
    f"MinAtar/{game}-v0" for game in ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")
)
CLASSIC = ("CartPole-v1", "Pendulum-v1")
# Today's defaults (FusedConfig(): block 256, 4 warps) for every family of the matrix.
DEFAULT = (
    *(Case(env, policy) for env in CLASSIC for policy in POLICIES),
    Case("Swarm-v0", "random", make_kwargs=_swarm(16)),
    Case("Swarm-v0", "random", make_kwargs=_swarm(1024)),
    *(Case(env, policy) for env in MINATAR for policy in POLICIES),
)
CLASSIC_MORE = ("MountainCar-v0", "MountainCarContinuous-v0", "Acrobot-v1")
# The rest of what `backend="auto"` may choose the kernel for, at the defaults: the other classic
# environments and the small MLP (16x16) the GPU tests use.
EXTRA = (
    *(Case(env, policy) for env in CLASSIC_MORE for policy in POLICIES),
    *(Case(env, "mlp", hidden=(16, 16)) for env in (*CLASSIC, *CLASSIC_MORE)),
)


def _tunings(env: str, policy: str, configs, **kw) -> tuple[Case, ...]:
    return tuple(Case(env, policy, block, warps, **kw) for block, warps in configs)


# Where a default compiles slowly, spills or fails: smaller blocks, more or fewer warps.
SWEEP = (
    *(
        case
        for env in CLASSIC
        for case in _tunings(
            env, "mlp", ((256, 16), (256, 8), (128, 4), (128, 8), (64, 4), (64, 2), (32, 1))
        )
    ),
    *_tunings("Swarm-v0", "random", ((128, 4), (64, 2)), make_kwargs=_swarm(16)),
    *_tunings("Swarm-v0", "random", ((1, 1), (2, 1), (4, 1)), make_kwargs=_swarm(1024)),
    *(
        case
        for env in (MINATAR[0], *MINATAR[2:])  # all but Breakout: slow at the default
        for case in _tunings(env, "random", ((128, 4), (64, 2)))
    ),
    *_tunings("MinAtar/Breakout-v0", "mlp", ((32, 4), (16, 4))),
    # Issue 41: an MLP's float32 dots spill unless each environment has 8 threads or more
    # (64x64) or 2 (16x16); MinAtar's open-loop kernels at 128 environments as the random ones.
    *_tunings("CartPole-v1", "mlp", ((32, 2), (32, 4), (32, 8), (16, 2), (16, 4), (64, 8))),
    *(
        case
        for env in (*CLASSIC, *CLASSIC_MORE)
        for case in (
            *_tunings(env, "mlp", ((64, 16), (128, 32))),
            *_tunings(env, "mlp", ((256, 16), (128, 8)), hidden=(16, 16)),
        )
    ),
    *(Case(env, "open_loop", 128, 4) for env in (MINATAR[2], MINATAR[4])),
    *_tunings("Acrobot-v1", "mlp", ((32, 8), (16, 4))),  # 255 registers: 512 threads spill
    # MinAtar's first layer in pieces: 16 cells per dot (the 400-term sum does not compile).
    *_tunings("MinAtar/Breakout-v0", "mlp", ((32, 8), (16, 4)), mlp_first_layer="chunks"),
    *(
        Case(env, "mlp", b, w, mlp_first_layer="columns")
        for env, b, w in (
            ("CartPole-v1", 64, 16),
            ("MinAtar/Breakout-v0", 32, 8),
            ("MinAtar/Breakout-v0", 32, 4),
        )
    ),
)
SMALL = (
    Case("CartPole-v1", "random"),
    Case("Pendulum-v1", "random"),
    Case("CartPole-v1", "random", block_envs=32, num_warps=1),
)
CASE_SETS = {"default": DEFAULT, "extra": EXTRA, "sweep": SWEEP, "small": SMALL}


def family(case: Case) -> str:
    """The case's environment family as `jaxsim.fused.compile_record` names it."""
    import jaxsim
    from jaxsim.fused.compile_record import env_family

    return env_family(jaxsim.make(case.env_id, **dict(case.make_kwargs)))
