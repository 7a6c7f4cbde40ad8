"""The results report's headline table: published figures beside the ones measured here."""

from __future__ import annotations

import collections
from collections.abc import Sequence

from benchmarks.breakdown.suite import percent, share
from benchmarks.fusion.suite import fusion_ratios
from benchmarks.harness.formatting import format_ratio, format_table
from benchmarks.offpolicy_solve.suite import solve_summary
from benchmarks.report.records import Record
from benchmarks.rollout_throughput.suite import same_run_ratios, throughput_envs

PUBLISHED = (
    ("GPU-vectorized simulation vs CPU simulators", "arXiv 2207.07736", "up to 1024x"),
    ("XLA implementation vs eager DNN-framework one", "arXiv 2207.07736", "13.4x"),
    ("Kernel fusion of simulator steps, CartPole", "arXiv 2207.07736", "11.3x"),
    ("On-policy vs off-policy: more simulation-bound", "RL-Scope, arXiv 2102.04285", ">= 3.5x"),
    ("RL time on the CPU (PPO: GPU busy <= 5%)", "RL-Scope, arXiv 2102.04285", "~90%"),
    (
        "Off-policy training (SAC, TD3) without eager PyTorch's per-step overhead",
        "LeanRL (torch.compile + CUDA graphs)",
        "2.7x-6.8x",
    ),
)


def _best_ratio(r: Record, num: str, den: str, envs: Sequence[str]) -> tuple | None:
    """(ratio at the largest N both ran on the first env, N, best ratio, its env, its N)."""
    first = None
    best = None
    for env_id in envs:
        rr = same_run_ratios(r, env_id, num, den)
        if not rr:
            continue
        if first is None:
            n = max(rr)
            first = (env_id, n, rr[n]["median"])
        for n, v in rr.items():
            if best is None or v["median"] > best[2]:
                best = (env_id, n, v["median"])
    if first is None:
        return None
    return (*first, *best)


def headline(selected: Sequence[Record], off_policy: str) -> list[list[str]]:
    """The published figures beside the measured ones: [claim, source, published, measured]."""
    by: dict[str, list[Record]] = collections.defaultdict(list)
    for r in selected:
        by[r.benchmark].append(r)
    cells: list[list[str]] = [[] for _ in PUBLISHED]
    # 1 and 2: same-run throughput ratios, from the first of a machine's records that has them.
    machines: dict[str, list[Record]] = collections.defaultdict(list)
    for r in by["rollout_throughput"]:
        machines[r.device].append(r)
    for device, records in machines.items():
        for row, den, what in (
            (0, "gymnasium_sync", "Gymnasium SyncVectorEnv"),
            (1, "torch", "eager-PyTorch CartPole"),
        ):
            found = (_best_ratio(r, "jaxsim", den, throughput_envs(r)) for r in records)
            got = next((g for g in found if g is not None), None)
            if got is None:
                cells[row].append(f"{device}: not measured ({what} not in its runs)")
                continue
            env_id, n, v, best_env, best_n, best_v = got
            text = f"{device}: jaxsim ÷ {what} = **{format_ratio(v)}** ({env_id}, N={n})"
            if (best_env, best_n) != (env_id, n):
                text += f"; up to {format_ratio(best_v)} ({best_env}, N={best_n})"
            cells[row].append(text)
    if not any(r.is_gpu for r in by["rollout_throughput"]):
        cells[0].append(
            "GPU: not measured (no GPU throughput record; the GPU machine has no "
            "CPU simulator to compare within one run)"
        )
        cells[1].append("GPU: not measured (no GPU record with a PyTorch baseline)")
    # 3: fusion, on a GPU only.
    for r in by["fusion"]:
        fr = [p for p in fusion_ratios(r) if p["env_id"] == "CartPole-v1" and p["ratio"]]
        if not fr:
            cells[2].append(f"{r.device}: not measured (no CartPole fused and scan points)")
            continue
        n_max = max(p["num_envs"] for p in fr)
        best = max((p for p in fr if p["num_envs"] == n_max), key=lambda p: p["ratio"])
        where = f"{best['policy']}/{best['outputs']}, N={n_max}, K={best['k']}"
        if r.data.get("interpret_mode"):
            cells[2].append(
                f"{r.device}: not measured: needs a GPU (here the kernel runs in Pallas "
                f"interpret mode: fused ÷ scan = {format_ratio(best['ratio'])}, {where}, is a "
                "correctness cost, not a speed)"
            )
        else:
            cells[2].append(
                f"{r.device}: fused ÷ scan = **{format_ratio(best['ratio'])}** ({where})"
            )
    if not any(r.is_gpu for r in by["fusion"]):
        cells[2].append(
            "GPU: not measured (no GPU fusion record yet: run benchmarks/gpu_check.sh on a GPU)"
        )
    # 4: on-policy vs off-policy simulation shares; 5: breakdown shares.
    for r in by["offpolicy"]:
        cells[3].append(f"{r.device}: {off_policy_finding(r)}")
    for r in by["breakdown"]:
        if not by["offpolicy"]:
            scan = share(r, "ppo_scan", "simulation")
            gym_sim = share(r, "gym_sync", "simulation")
            on = []
            if scan is not None:
                on.append(f"jaxsim one-jit PPO {100 * scan:.0f}%")
            if gym_sim is not None:
                on.append(f"Gymnasium-loop PPO {100 * gym_sim:.0f}%")
            cells[3].append(
                f"not measured: {off_policy}. On-policy simulation share here "
                f"({r.device}): {', '.join(on) or '–'}"
            )
        host = share(r, "gym_sync", "host/Python")
        host_scan = share(r, "ppo_scan", "host/Python")
        text = f"{r.device}: host/Python share of a PPO iteration: "
        text += (
            ", ".join(
                f"{name} {100 * v:.0f}%"
                for name, v in (("Gymnasium loop", host), ("jaxsim one-jit", host_scan))
                if v is not None
            )
            or "–"
        )
        if not r.is_gpu:
            text += " (all on the CPU here; GPU busy time: not measured, needs a GPU)"
        cells[4].append(text)
    # 6: off-policy time to solve, one-jit jaxsim beside SB3 (eager PyTorch).
    for r in by["offpolicy_solve"]:
        cells[5].append(
            f"{r.device}: SB3 (eager PyTorch) ÷ jaxsim one-jit, training time to solve per seed: "
            f"{solve_summary(r)}"
        )
    for i, why in (
        (0, "no throughput record"),
        (1, "no throughput record"),
        (2, "no fusion record"),
        (4, "no breakdown record"),
        (5, "no offpolicy_solve record"),
    ):
        if not cells[i]:
            cells[i].append(f"not measured ({why})")
    if not cells[3]:
        cells[3].append(f"not measured: {off_policy}")
    return [[*pub, "<br>".join(c)] for pub, c in zip(PUBLISHED, cells, strict=True)]


def off_policy_finding(r: Record) -> str:
    """An offpolicy record's ratios: "PPO ÷ DQN = **48.1x** (CartPole-v1: 12.5% vs 0.259% of an
    update simulating); ...", then those of its Gymnasium loops, or what it did not measure."""
    found = pair_ratios(r.data["comparison"], "of an update simulating")
    if not found:
        return "not measured (the offpolicy record has no complete pair)"
    text = "simulation share, one-jit jaxsim loops at the agents' presets: " + found
    loops = r.data.get("gymnasium_loops")
    if isinstance(loops, str):  # older records: a sentence
        text += f". Gymnasium-loop agents: {loops}"
    elif isinstance(loops, dict) and loops.get("measured"):
        found = pair_ratios(loops["comparison"], "of learn() in the VecEnv")
        text += f". SB3 agents stepping Gymnasium (rl-zoo settings): {found or 'no pair'}"
    elif isinstance(loops, dict):
        text += f". Gymnasium-loop agents: not measured ({loops.get('reason')})"
    return text


def pair_ratios(comparison: Sequence[dict], what: str) -> str:
    """ "PPO ÷ DQN = **48.1x** (CartPole-v1: 12.5% vs 0.259% <what>); ..." for comparison rows."""
    found = []
    for c in comparison:
        on, off = c["on_policy"].upper(), c["off_policy"].upper()
        ratio = f"**{format_ratio(c['ratio'])}**" if c["ratio"] else "– (off-policy share 0)"
        found.append(
            f"{on} ÷ {off} = {ratio} ({c['env']}: {percent(c['on_policy_simulation_share'])} vs "
            f"{percent(c['off_policy_simulation_share'])} {what})"
        )
    return "; ".join(found)


def headline_table(selected: Sequence[Record], off_policy: str) -> str:
    try:
        rows = headline(selected, off_policy)
    except Exception as e:  # a record of an unexpected schema: say so rather than guess
        rows = [[*pub, f"could not compute: {type(e).__name__}: {e}"] for pub in PUBLISHED]
    return format_table(
        ["published figure", "source", "published", "jaxsim, measured here"],
        rows,
        left=4,
    )
