"""The throughput suite: rollout env-steps/s against num_envs, jaxsim beside the baselines."""

from __future__ import annotations

from typing import Any

from benchmarks.harness.suite import Plan, Suite
from benchmarks.report import schema as s
from benchmarks.rollout_throughput.section import (
    plot_throughput,
    throughput_scope,
    throughput_section,
)

BASELINES = ("gymnasium_sync", "gymnasium_async", "gymnasium_numpy", "envpool", "gymnax", "torch")


def args(p: Plan) -> list[str]:
    impls = ["jaxsim", "jaxsim_reuse", "jaxsim_rewards"]
    impls += [*(b for b in BASELINES if b in p.baselines), "physics_only"]
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
        # The main job's few minutes: CartPole (the targets' env, every baseline) and Pendulum
        # (continuous actions) at the two ends of N; 2^16 steps per call, as the scan at N=1 is
        # sequential. N=16 is left to full runs (all five environments, 2^21 steps): there
        # AsyncVectorEnv starts 16 processes, 2 s on idle cores but minutes on busy ones.
        return ["--quick", "--envs", "CartPole-v1,Pendulum-v1", *impls_arg,
                *"--num-envs 1,4096 --min-time 0.1 --steps-per-call 65536".split()]  # fmt: skip
    return ["--envs", "all", *impls_arg]


# The memory floor (issue 26): optional, as records published before it lack it.
FLOOR = (
    ("floor.bytes_per_step.total", s.positive),
    ("floor.steps_per_s", s.positive),
    ("floor.fraction", s.positive),
)
BANDWIDTH = (("memory_bandwidth.bytes_per_s", s.positive), ("memory_bandwidth.samples", s.LIST))


def problems(data: dict[str, Any]) -> list[str]:
    point = (("impl", s.STR), ("num_envs", s.INT), ("status", s.STR))
    found = s.points(data, point, s.TIMED, (("reason", s.STR),))
    if found:
        return found
    floored = [i for i, p in enumerate(data["results"]) if "floor" in p]
    for i in floored:
        where = f"results[{i}]"
        found += [
            f"{x} (impl={data['results'][i].get('impl')})"
            for x in s.check(data["results"][i], where, FLOOR)
        ]
    # A floor is a figure over a bandwidth: a record with floors must say which.
    found += s.check(data, "", BANDWIDTH, required=bool(floored))
    return found


SUITE = Suite(
    name="throughput",
    module="benchmarks.rollout_throughput.measure",
    title="rollout env-steps/s vs num_envs, all environments, jaxsim and the baselines",
    heading="## Rollout throughput vs num_envs",
    problems=problems,
    section=throughput_section,
    args=args,
    plot=plot_throughput,
    scope=throughput_scope,
)
