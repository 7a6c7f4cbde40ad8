"""The benchmark suites the front door runs, the baselines they measure, and each suite's
arguments per mode (smoke, quick, full) and device."""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable

MODES = ("smoke", "quick", "full")
# Seconds a suite may run before it is stopped and recorded as failed.
TIMEOUT_S = {"smoke": 300, "quick": 900, "full": 3 * 3600}

# Baselines: name -> (what it is, the distribution that provides it, the suite that measures it).
BASELINES = {
    "gymnasium_sync": ("Gymnasium SyncVectorEnv", "gymnasium", "throughput, breakdown"),
    "gymnasium_async": ("Gymnasium AsyncVectorEnv", "gymnasium", "throughput"),
    "gymnasium_numpy": ("Gymnasium numpy-vectorized CartPole", "gymnasium", "throughput"),
    "envpool": ("EnvPool", "envpool", "throughput"),
    "gymnax": ("gymnax", "gymnax", "throughput, adapters"),
    "brax": ("brax's own jit(scan(step)) loop, its auto-reset", "brax", "adapters"),
    "torch": ("eager-PyTorch vectorized CartPole", "torch", "throughput"),
    "sb3": ("Stable-Baselines3 PPO", "stable-baselines3", "ppo"),
}
# The exact command that installs each optional module (from the repository root). torch comes
# first as the CPU build: otherwise pip resolves it to the default build, which bundles CUDA.
_CPU_TORCH = (
    "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu && "
    'pip install -e ".[baselines]"'
)
INSTALL = {
    "gymnasium": 'pip install -e ".[bench]"',
    "gymnax": 'pip install -e ".[bench]"',
    "brax": 'pip install -e ".[brax]"',
    "envpool": _CPU_TORCH,
    "torch": _CPU_TORCH,
    "stable-baselines3": _CPU_TORCH,
    "stable_baselines3": _CPU_TORCH,
}


def install_hint(module: str) -> str:
    """'install with: <command>' for an optional module (or its distribution), else ''."""
    command = INSTALL.get(module.split(".")[0])
    return f"install with: {command}" if command else ""


THROUGHPUT_BASELINES = (
    "gymnasium_sync",
    "gymnasium_async",
    "gymnasium_numpy",
    "envpool",
    "gymnax",
    "torch",
)


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a suite is asked to do: the mode, the selected baselines and the device."""

    mode: str
    baselines: frozenset[str]
    on_gpu: bool


@dataclasses.dataclass(frozen=True)
class Suite:
    name: str
    module: str  # run as `python -m <module> <args> --out <record>`
    record_stem: str  # the record is <record_stem>_<machine tag>[_<mode>].json
    title: str
    args: Callable[[Plan], list[str]]
    missing_reason: str = ""  # why the module may be missing


def _throughput_args(p: Plan) -> list[str]:
    impls = ["jaxsim", "jaxsim_rewards"]
    impls += [*(b for b in THROUGHPUT_BASELINES if b in p.baselines), "physics_only"]
    impls_arg = ["--impls", ",".join(impls)]
    if p.mode == "smoke":
        tiny = "--num-envs 2 --min-time 0 --steps-per-call 256 --async-max-envs 2".split()
        return ["--envs", "CartPole-v1,Pendulum-v1", *impls_arg, *tiny]
    if p.on_gpu:  # no CPU simulator there: batch sizes where an accelerator pays off
        sizes = "1,256,4096,65536,1048576" if p.mode == "quick" else "1,16,256,4096,65536,1048576"
        quick = ["--quick"] if p.mode == "quick" else []
        return [*quick, "--envs", "all", *impls_arg, "--num-envs", sizes,
                "--steps-per-call", "4194304"]  # fmt: skip
    if p.mode == "quick":
        return [
            "--quick",
            "--envs",
            "all",
            *impls_arg,
            *"--num-envs 1,16,4096 --min-time 0.1".split(),
        ]
    return ["--envs", "all", *impls_arg]


def _fusion_args(p: Plan) -> list[str]:
    if p.mode == "smoke":
        return (
            "--policies random --outputs stats --num-envs 256 --k 4 --steps 8 --min-time 0".split()
        )
    if p.on_gpu:
        return ["--quick"] if p.mode == "quick" else []
    # On a CPU the kernel runs in Pallas interpret mode: a correctness cost, kept small.
    if p.mode == "quick":
        return "--quick --outputs rewards --k 1,4,16 --min-time 0.1".split()
    return "--k 1,4,16,64".split()


def _sizes_args(p: Plan) -> list[str]:
    if p.mode == "smoke":
        return "--sizes 1,16 --outputs rewards --num-envs 8 --steps 4 --k 2 --min-time 0".split()
    if p.on_gpu:
        return [] if p.mode == "full" else "--sizes 1024,64,1 --budget-s 120".split()
    # On a CPU the kernel runs in Pallas interpret mode: a correctness cost, kept small.
    return "--sizes 1,16,256 --outputs rewards".split() if p.mode == "quick" else []


def _ppo_args(p: Plan) -> list[str]:
    sb3 = [] if "sb3" in p.baselines else ["--no-sb3"]
    if p.mode == "smoke":
        return ("--envs CartPole-v1 --seeds 1 --total-steps 1024 --warm-repeats 1 --no-sb3 "
                "--no-whole-process --no-gpu-sps").split()  # fmt: skip
    if p.mode == "quick":
        # A real time-to-solve on CartPole (3 seeds at once), SB3 with one seed beside it.
        return ["--envs", "CartPole-v1", "--sb3-seeds", "1", "--no-whole-process", *sb3]
    return sb3


def _breakdown_args(p: Plan) -> list[str]:
    cases = ["ppo_scan", "ppo_fused"]
    if "gymnasium_sync" in p.baselines:
        cases.append("gym_sync")
    if p.mode == "smoke":
        return ("--cases ppo_scan --num-envs 2 --num-steps 16 --update-epochs 1 "
                "--num-minibatches 1 --iterations 1 --repeats 1 --min-time 0").split()  # fmt: skip
    return ["--cases", ",".join(cases), *(["--quick"] if p.mode == "quick" else [])]


def _offpolicy_args(p: Plan) -> list[str]:
    if p.mode == "smoke":
        return "--envs CartPole-v1 --iterations 1 --repeats 1 --min-time 0 --no-gym-loops".split()
    return ["--quick"] if p.mode == "quick" else []


def _scaling_args(p: Plan) -> list[str]:
    if p.mode == "smoke":
        return "--num-envs 256 --steps 16 --repeats 1 --min-time 0".split()
    return ["--quick"] if p.mode == "quick" else []


def _adapters_args(p: Plan) -> list[str]:
    # Each adapter is measured beside its own library, so a library left out is a family left
    # out; Gymnasium's MuJoCo Ant-v5 comes with the Gymnasium baselines.
    families = [f for f in ("brax", "gymnax") if f in p.baselines]
    families += ["gymnasium"] if "gymnasium_sync" in p.baselines else []
    selected = ["--families", ",".join(families) or "none"]
    if p.mode == "smoke":
        return [*selected, *("--brax-env inverted_pendulum --num-envs 2 --brax-steps-per-call 8 "
                "--gymnax-steps-per-call 8 --min-steps 4 --repeats 1 --gymnasium-steps 8 "
                "--gymnasium-vector-envs 2").split()]  # fmt: skip
    return [*selected, *(["--quick"] if p.mode == "quick" else [])]


SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite(
            "throughput",
            "benchmarks.rollout_throughput",
            "rollout_throughput",
            "rollout env-steps/s vs num_envs, all environments, jaxsim and the baselines",
            _throughput_args,
        ),
        Suite(
            "fusion",
            "benchmarks.fusion",
            "fusion",
            "scan vs fused rollouts, K sweep (Pallas interpret mode on a CPU)",
            _fusion_args,
        ),
        Suite(
            "sizes",
            "benchmarks.fusion_sizes",
            "fusion_sizes",
            "scan vs fused on Swarm-v0 as its state grows, beside a traffic model",
            _sizes_args,
        ),
        Suite(
            "ppo",
            "benchmarks.ppo",
            "ppo",
            "PPO time-to-solve, Stable-Baselines3 beside it",
            _ppo_args,
        ),
        Suite(
            "offpolicy",
            "benchmarks.offpolicy",
            "offpolicy",
            "simulation share of an update: PPO beside DQN (CartPole) and SAC (Pendulum)",
            _offpolicy_args,
        ),
        Suite(
            "breakdown",
            "benchmarks.breakdown",
            "breakdown",
            "profiler breakdown of a PPO iteration (simulation, policy, learning, host)",
            _breakdown_args,
        ),
        Suite(
            "scaling",
            "benchmarks.scaling",
            "scaling",
            "rollout env-steps/s vs device count, the batch split over a mesh",
            _scaling_args,
        ),
        Suite(
            "adapters",
            "benchmarks.adapters",
            "adapters",
            "brax and gymnax through jaxsim.rollout beside their own loops, Gymnasium Ant-v5",
            _adapters_args,
        ),
    )
}


def suite_available(suite: Suite) -> str | None:
    """None if the suite's module exists, else why it is skipped."""
    try:
        found = importlib.util.find_spec(suite.module) is not None
    except (ImportError, ValueError):
        found = False
    if found:
        return None
    why = f"{suite.module.replace('.', '/')}.py does not exist in this checkout"
    return f"{why}: {suite.missing_reason}" if suite.missing_reason else why
