"""The throughput suite: rollout env-steps/s against num_envs, jaxsim beside the baselines.

Its section of the results report: env-steps/s tables and same-run ratios."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness.formatting import format_rate, format_ratio, format_seconds, format_table
from benchmarks.harness.suite import Plan, Suite
from benchmarks.report import schema as s
from benchmarks.report.markdown import image, provenance_block, pyplot, save
from benchmarks.report.records import Record

ENV_ORDER = (
    "CartPole-v1",
    "Pendulum-v1",
    "MountainCar-v0",
    "MountainCarContinuous-v0",
    "Acrobot-v1",
)
IMPL_LABELS = {
    "jaxsim": "jaxsim (scan)",
    "jaxsim_reuse": "jaxsim (scan), out= reuse",
    "jaxsim_rewards": "jaxsim (scan), rewards only",
    "gymnasium_sync": "Gymnasium SyncVectorEnv",
    "gymnasium_async": "Gymnasium AsyncVectorEnv",
    "gymnasium_numpy": "Gymnasium numpy-vector",
    "envpool": "EnvPool",
    "gymnax": "gymnax",
    "torch": "eager PyTorch",
    "physics_only": "jaxsim physics only",
}
IMPL_COLORS = {
    "jaxsim": "#d62728",
    "jaxsim_reuse": "#bcbd22",
    "jaxsim_rewards": "#e377c2",
    "gymnasium_sync": "#1f77b4",
    "gymnasium_async": "#17becf",
    "gymnasium_numpy": "#2ca02c",
    "envpool": "#9467bd",
    "gymnax": "#ff7f0e",
    "torch": "#8c564b",
    "physics_only": "#7f7f7f",
}


def throughput_points(r: Record) -> list[dict[str, Any]]:
    return [
        dict(p, env_id=p.get("env_id", r.data.get("env_id") or "CartPole-v1"))
        for p in r.data.get("results", [])
    ]


def throughput_envs(r: Record) -> list[str]:
    envs = {p["env_id"] for p in throughput_points(r)}
    return [e for e in ENV_ORDER if e in envs] + sorted(envs - set(ENV_ORDER))


def throughput_scope(data: dict[str, Any]) -> str:
    """What a record measured: empty for a sweep over batch sizes, "N=4096, 1000 steps a call"
    for a run at one size, which the report shows beside the machine's sweep, not in its place."""
    cfg = data.get("config") or {}
    ns = cfg.get("num_envs") or []
    if len(ns) != 1:
        return ""
    steps = cfg.get("steps_per_call")
    return f"N={ns[0]}" + (f", {steps // ns[0]} steps a call" if steps else "")


def ordered_impls(points: Sequence[dict[str, Any]]) -> list[str]:
    """The impls of `points` in the report's order (`IMPL_LABELS`), any other after them."""
    seen = list(dict.fromkeys(p["impl"] for p in points))
    return [i for i in IMPL_LABELS if i in seen] + [i for i in seen if i not in IMPL_LABELS]


def same_run_ratios(r: Record, env_id: str, num: str, den: str) -> dict[int, dict[str, float]]:
    """num / den env-steps/s at each N both measured in record `r` (median, worst, best)."""
    got: dict[str, dict[int, dict[str, float]]] = {num: {}, den: {}}
    for p in throughput_points(r):
        if p["env_id"] == env_id and p["impl"] in got and p["status"] == "ok":
            got[p["impl"]][p["num_envs"]] = p["steps_per_s"]
    out = {}
    for n in sorted(set(got[num]) & set(got[den])):
        a, b = got[num][n], got[den][n]
        out[n] = {
            "median": a["median"] / b["median"],
            "low": a["min"] / b["max"],
            "high": a["max"] / b["min"],
        }
    return out


def _dynamics_cell(r: Record, env_id: str, impl: str) -> str:
    points = [p for p in throughput_points(r) if p["env_id"] == env_id and p["impl"] == impl]
    key = next((p["dynamics_check"] for p in points if p.get("dynamics_check")), None)
    checks = r.data.get("checks", {})
    if impl == "physics_only" and "physics_only_matches_env_step" in checks:
        return "✓ = env.step" if checks["physics_only_matches_env_step"]["pass"] else "✗"
    if key is None or key not in checks:
        return "–"
    c = checks[key]
    if "transitions" in c:
        detail = f"{c['transitions']} transitions"
    elif "method" in c:
        detail = "statistics"
    else:
        detail = c.get("reason", "")
    return f"{'✓' if c['pass'] else '✗ differs'} ({detail})"


def _env_key(where: str) -> tuple:
    env_id, _, n = where.partition(" N=")
    order = ENV_ORDER.index(env_id) if env_id in ENV_ORDER else len(ENV_ORDER)
    return (order, env_id, int(n) if n else 0)


def _generic(reason: str, env_id: str) -> str:
    """A skip reason with the environment's name taken out, so that reasons group."""
    reason = re.sub(rf",? not {re.escape(env_id)}$", "", reason)
    return reason.replace(f"numpy-vectorized {env_id}", "numpy-vectorized env")


# Rows that have a memory floor (benchmarks/rollout_throughput/floor.py FLOOR_MODES).
FLOOR_IMPLS = ("jaxsim", "jaxsim_reuse", "jaxsim_rewards", "physics_only")


def percent(fraction: float) -> str:
    x = 100 * fraction
    return f"{x:.0f}%" if x >= 10 else f"{x:.1f}%" if x >= 1 else f"{x:.2f}%"


def _bandwidth_text(r: Record) -> str:
    bw = r.data.get("memory_bandwidth")
    if not bw:
        return "Memory floor: — (not recorded in this record)."
    return (
        f"Memory floor: the bytes an env-step must move (its state read and written, its outputs "
        f"written; from the traced shapes) over this run's copy bandwidth, "
        f"{bw['bytes_per_s'] / 1e9:.3g} GB/s read + written ({bw.get('method', '?')}). The "
        "state is counted at memory speed; where a batch's state stays in cache (up to tens of "
        "thousands of environments) a step moves less, and a figure can pass 100%."
    )


def _floor_rows(r: Record, env_id: str, points, ns: Sequence[int]) -> list[list[str]]:
    """Each floor row's figure as a fraction of its memory floor, and rewards-only over the
    compute floor (the physics-only row), at every N; "—" where the record has no floor."""
    rows = []
    for impl in FLOOR_IMPLS:
        by_n = {p["num_envs"]: p for p in points if p["impl"] == impl and p["status"] == "ok"}
        if not by_n:
            continue
        floors = {n: p["floor"] for n, p in by_n.items() if p.get("floor")}
        size = next((f["bytes_per_step"]["total"] for f in floors.values()), None)
        rows.append(
            [
                f"{IMPL_LABELS.get(impl, impl)} ÷ memory floor",
                "—" if size is None else str(size),
                *(percent(floors[n]["fraction"]) if n in floors else "—" for n in ns),
            ]
        )
    compute = same_run_ratios(r, env_id, "jaxsim_rewards", "physics_only")
    if compute:
        rows.append(
            [
                f"{IMPL_LABELS['jaxsim_rewards']} ÷ compute floor (physics only)",
                "",
                *(percent(compute[n]["median"]) if n in compute else "—" for n in ns),
            ]
        )
    return rows


def throughput_section(r: Record, base: Path, plot: Path | None) -> str:
    cfg = r.data.get("config", {})
    points = throughput_points(r)
    parts = [
        f"### Rollout throughput: {r.device}"
        + (f", {scope}" if (scope := throughput_scope(r.data)) else ""),
        provenance_block(r, base),
        f"Random policy, env-steps/s: median of {cfg.get('repeats', '?')} timed samples of at "
        f"least {cfg.get('min_time', '?')} s after compile and warm-up (± half the min-max "
        "spread, in % of the median). Compile: jax trace + lower + compile of the first call, "
        "the largest over N. Each implementation is checked against jaxsim's `env.step` from "
        "the same states with the same actions before it is timed (EnvPool, which cannot be "
        "set to a state, statistically), and every timed call for dropped steps. Gymnasium "
        "and EnvPool spend one step per episode on the reset (NEXT_STEP auto-reset); those "
        "steps count, as they count them.",
    ]
    parts.append(_bandwidth_text(r))
    if plot is not None:
        parts.append(image(plot, base, f"env-steps/s vs num_envs on {r.device}"))
    notes: dict[tuple[str, str], set[str]] = {}
    for env_id in throughput_envs(r):
        env_points = [p for p in points if p["env_id"] == env_id]
        ns = sorted({p["num_envs"] for p in env_points})
        rows = []
        for impl in ordered_impls(env_points):
            cells, compile_s = [], []
            by_n = {p["num_envs"]: p for p in env_points if p["impl"] == impl}
            if all(by_n[n]["status"] == "skipped" for n in by_n):
                reason = _generic(next(iter(by_n.values()))["reason"], env_id)
                notes.setdefault((impl, reason), set()).add(env_id)
                continue
            for n in ns:
                p = by_n.get(n)
                if p is None:
                    cells.append("")
                elif p["status"] == "ok":
                    sps = p["steps_per_s"]
                    spread = 50 * (sps["max"] - sps["min"]) / sps["median"]
                    cells.append(f"{format_rate(sps['median'])} ±{spread:.0f}%")
                    if p.get("compile_s") is not None:
                        compile_s.append(p["compile_s"])
                else:
                    cells.append(p["status"])
                    reason = _generic(p["reason"], env_id)
                    notes.setdefault((impl, reason), set()).add(f"{env_id} N={n}")
            rows.append(
                [
                    IMPL_LABELS.get(impl, impl),
                    _dynamics_cell(r, env_id, impl),
                    format_seconds(max(compile_s), 2) if compile_s else "–",
                    *cells,
                ]
            )
        headers = ["implementation", "dynamics check", "compile s", *(f"N={n}" for n in ns)]
        parts.append(f"#### {env_id}\n\n" + format_table(headers, rows, left=2))
        ratio_rows = []
        for impl in ordered_impls(env_points):
            if impl == "jaxsim":
                continue
            rr = same_run_ratios(r, env_id, "jaxsim", impl)
            if rr:
                ratio_rows.append(
                    [
                        f"jaxsim ÷ {IMPL_LABELS.get(impl, impl)}",
                        *(format_ratio(rr[n]["median"]) if n in rr else "–" for n in ns),
                    ]
                )
        if ratio_rows:
            parts.append(
                "Same-run ratios (medians):\n\n"
                + format_table(["ratio", *(f"N={n}" for n in ns)], ratio_rows)
            )
        floor_rows = _floor_rows(r, env_id, env_points, ns)
        if floor_rows:
            parts.append(
                "Fraction of the floor (medians; — where the record has no floor):\n\n"
                + format_table(["figure", "bytes/step", *(f"N={n}" for n in ns)], floor_rows)
            )
    if notes:
        lines = ["Not measured:"]
        for (impl, reason), where in sorted(notes.items()):
            where_text = ", ".join(sorted(where, key=_env_key))
            lines.append(f"- {IMPL_LABELS.get(impl, impl)} ({where_text}): {reason}")
        parts.append("\n".join(lines))
    targets = r.data.get("targets") or []
    if targets:
        rows = []
        for t in targets:
            bound = f">= {t['min']}" if "min" in t else f"< {t.get('max')}"
            value = "–" if t.get("value") is None else f"{t['value']:.3g}"
            if t.get("range"):
                value += f" ({t['range'][0]:.3g}-{t['range'][1]:.3g})"
            rows.append([f"{t['name']} @ N={t['num_envs']}", value, bound, t["status"]])
        parts.append(
            "Targets (CartPole-v1):\n\n"
            + format_table(["target", "value (worst-best pairing)", "required", "result"], rows)
        )
    return "\n\n".join(parts)


def plot_throughput(r: Record, path: Path) -> Path:
    plt = pyplot()
    envs = throughput_envs(r)
    cols = min(3, len(envs) + 1)
    rows = math.ceil((len(envs) + 1) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.6 * rows), squeeze=False)
    flat = list(axes.flat)
    handles = {}
    for ax, env_id in zip(flat, envs, strict=False):
        pts = [p for p in throughput_points(r) if p["env_id"] == env_id and p["status"] == "ok"]
        for impl in ordered_impls(pts):
            mine = sorted((p for p in pts if p["impl"] == impl), key=lambda p: p["num_envs"])
            x = [p["num_envs"] for p in mine]
            y = [p["steps_per_s"]["median"] for p in mine]
            err = [
                [yy - p["steps_per_s"]["min"] for yy, p in zip(y, mine, strict=True)],
                [p["steps_per_s"]["max"] - yy for yy, p in zip(y, mine, strict=True)],
            ]
            h = ax.errorbar(
                x,
                y,
                yerr=err,
                marker="o",
                ms=4,
                capsize=2,
                color=IMPL_COLORS.get(impl),
                label=IMPL_LABELS.get(impl, impl),
            )
            handles[impl] = h
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(env_id, fontsize=10)
        ax.set_xlabel("num_envs")
        ax.set_ylabel("env-steps/s")
        ax.grid(True, which="major", alpha=0.3)
    for ax in flat[len(envs) :]:
        ax.axis("off")
    legend_ax = flat[len(envs)] if len(flat) > len(envs) else flat[-1]
    order = ordered_impls([{"impl": i} for i in handles])
    legend_ax.legend(
        [handles[i] for i in order],
        [IMPL_LABELS.get(i, i) for i in order],
        loc="center",
        frameon=False,
    )
    p = r.prov
    fig.suptitle(
        f"Random-policy env-steps/s vs num_envs on {r.device}: median, min-max of repeats\n"
        f"{r.mode} run {r.utc}, commit {str(p.get('commit'))[:12]}",
        fontsize=10,
    )
    return save(plt, fig, path)


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
