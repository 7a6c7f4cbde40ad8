"""The peers suite: jaxsim's agents beside brax's PPO and SAC trainers, rejax and SBX, each peer
in its own venv (`bash benchmarks/peers/setup_envs.sh`), skipped with that command where it is
absent. brax cases: PPO speed on inverted_pendulum and ant, PPO and SAC time to a return of 1000
on inverted_pendulum; time to a score on ant is out of scope (brax's published 50M-step ant run
is hours of CPU per side).

Its section of the results report is also the table `python -m benchmarks.peers.measure`
prints (`summary`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness.formatting import (
    format_rate,
    format_ratio,
    format_seconds,
    format_table,
    format_verdict,
)
from benchmarks.harness.suite import Plan, Suite
from benchmarks.report import schema as s
from benchmarks.report.coverage import NOT_MEASURED

HEADERS = ["case", "jaxsim", "peer", "peer / jaxsim", "target", "load (1 min)"]


def _load(*values: Any) -> str:
    found = [f"{v:.1f}" for v in values if isinstance(v, (int, float))]
    return " – ".join(found) if found else "–"


def _jax(side: dict[str, Any] | None) -> str:
    return (side or {}).get("versions", {}).get("jax", "?")


def rows(record: dict[str, Any]) -> list[list[str]]:
    """One row per case: jaxsim's figure, the peer's, their ratio, the target's verdict, load."""
    found = []
    for name, case in record["cases"].items():
        if any(k in case for k in NOT_MEASURED):
            k = next(k for k in ("timed_out", "skipped", "failed") if k in case)
            why = case[k] if k == "skipped" else f"{k.replace('_', ' ')}: {case[k][:200]}"
            found.append([name, "not measured", why, "–", "–", _load(case.get("load_after"))])
            continue
        cmp = case["comparison"]
        verdict = f"{cmp['target']}: {format_verdict(cmp['target_met'], 'undecided')}"
        if name.startswith("brax_ppo_speed"):
            jx, brax = case["jaxsim"], case["brax"]
            ours = f"{format_rate(jx['sps'])} steps/s (compile {format_seconds(jx['compile_s'])} s)"
            theirs = (
                f"{format_rate(brax['steady_sps'])} steps/s (compile "
                f"{format_seconds(brax['compile_s'])} s, jax {_jax(brax)})"
            )
            load = _load(*jx["load"], brax.get("load_after"))
            shrink = case.get("batch_shrink", 1)  # > 1 in smoke runs only: say so beside the case
            shown = name if shrink == 1 else f"{name} (envs and batch / {shrink})"
            # jaxsim's env-steps/s over brax's: higher is better for jaxsim.
            found.append(
                [shown, ours, theirs, format_ratio(cmp["ratio"]) + " (jaxsim/brax)", verdict, load]
            )
            continue
        if name.startswith("sbx"):
            found.append(_sbx_row(name, case, verdict))
            continue
        if name == "brax_sac_solve":
            found.append(_brax_sac_row(name, case, verdict))
            continue
        jx = case["jaxsim"]
        peer_name = "brax" if name.startswith("brax") else "rejax"
        peer = case[peer_name]
        if name == "brax_ppo_solve":
            ours = _solve_text(
                jx["solved"],
                jx["train_wall_s_to_target"],
                jx["compile_s"],
                jx.get("steps_to_target"),
            )
            s = peer["summary"]
            theirs = _solve_text(
                s["solved"],
                s["train_wall_s_to_target"],
                None,
                s["steps_to_target"],
                best=s["best_eval_return"],
            )
            load = _load(jx["curve"][-1]["load"], peer.get("load_after"))
        else:
            per_seed = jx["train_wall_s_per_seed"] if jx["solved_all"] else None
            ours = _solve_text(
                jx["solved_all"],
                per_seed,
                jx.get("loop_compile_s", jx["compile_s"]) / jx["seeds"],
                None,
                seeds=f"{sum(jx['solved'])}/{jx['seeds']}",
            )
            # rejax's init (and its compile), counted in its time as jaxsim's init is in jaxsim's
            # (records from before `init_s` was kept: training alone).
            theirs = _solve_text(
                all(peer["solved"]),
                peer.get("train_wall_s_per_seed_init_in") or peer["train_wall_s_per_seed"],
                None,
                None,
                seeds=f"{sum(peer['solved'])}/{peer['seeds']}",
            )
            load = _load(jx["curve"][-1]["load"], peer.get("load_after"))
        shown = format_ratio(cmp["ratio"])
        more = cmp.get("ratios") or {}
        if more.get("warm") or more.get("without_compile"):
            shown += (
                f" cold; {format_ratio(more.get('warm'))} warm; "
                f"{format_ratio(more.get('without_compile'))} compile apart"
            )
        found.append([name, ours, f"{theirs}, jax {_jax(peer)}", shown, verdict, load])
    return found


def _brax_sac_row(name: str, case: dict[str, Any], verdict: str) -> list[str]:
    """Training time per seed: jaxsim's seeds at once / seeds, brax's mean over its processes."""
    jx, brax = case["jaxsim"], case["brax"]
    ours = _solve_text(
        jx["solved_all"],
        jx["train_wall_s_per_seed"],
        jx.get("loop_compile_s", jx["compile_s"]) / jx["seeds"],
        None,
        seeds=f"{sum(jx['solved'])}/{jx['seeds']}",
    )
    best = [b for b in brax["best_eval_return_per_seed"] if b is not None]
    theirs = _solve_text(
        brax["solved_all"],
        brax["train_wall_s_per_seed"],
        None,
        None,
        best=max(best) if best else None,
        seeds=f"{sum(brax['solved_per_seed'])}/{brax['seeds']}",
    )
    runs = brax.get("runs") or [{}]
    load = _load(jx["curve"][-1]["load"], *(r.get("load_after") for r in runs))
    shown = format_ratio(case["comparison"]["ratio"]) + " (brax/jaxsim)"
    return [name, ours, f"{theirs}, jax {_jax(runs[0])}", shown, verdict, load]


def _process_text(side: dict[str, Any]) -> str:
    flags = side["solved_per_seed"]
    seeds = f"{sum(flags)}/{len(flags)} seeds"
    if not side["solved_all"]:
        return f"not solved in budget, {seeds}"
    return f"{format_seconds(side['per_seed_wall_s'])} s/seed, {seeds}"


def _sbx_row(name: str, case: dict[str, Any], verdict: str) -> list[str]:
    """Whole processes per seed: jaxsim's train command cold (and warm), SBX's processes."""
    jx, sbx = case["jaxsim"], case["sbx"]
    ours = _process_text(jx["cold"]) + " cold"
    if jx.get("warm"):
        ours += f"; {_process_text(jx['warm'])} warm"
    runs = sbx.get("runs") or [{}]
    theirs = f"{_process_text(sbx)}, jax {_jax(runs[0])}"
    cmp = case["comparison"]
    shown = format_ratio(cmp["ratio"]) + " cold"
    if (cmp.get("ratios") or {}).get("warm"):
        shown += f"; {format_ratio(cmp['ratios']['warm'])} warm"
    sides = [jx["cold"].get("load_before"), (jx.get("warm") or jx["cold"]).get("load_after")]
    load = _load(*sides, *(r.get("load_after") for r in runs))
    return [name, ours, theirs, shown, verdict, load]


def _solve_text(solved, wall, compile_s, steps, best=None, seeds=None) -> str:
    if not solved:
        text = "not solved in budget" + (f" (best {best:.0f})" if best is not None else "")
        return text + (f", {seeds} seeds" if seeds else "")
    text = f"{format_seconds(wall)} s"
    if compile_s is not None:
        text += f" (compile {format_seconds(compile_s)} s)"
    if steps:
        text += f" at {steps:,} steps"
    return text + (f", {seeds} seeds" if seeds else "")


def split_lines(record: dict[str, Any]) -> list[str]:
    """For a speed case that measured its stepping alone (`measure.step_rows`): its ratio as the
    product of what the jax version does to brax's own step, jaxsim's stepping against brax's
    under one jax, and what each loop keeps of its stepping (`brax_case.split_gap`)."""
    lines = []
    for name, case in record["cases"].items():
        split = (case.get("comparison") or {}).get("split")
        if not split or not all(split.values()):
            continue
        s = case["stepping"]
        own, here, ours = s["brax_own_jax"], s["brax_jaxsim_jax"], s["jaxsim"]
        lines.append(
            f"{name}: jaxsim/brax {format_ratio(case['comparison']['ratio'])} = jax "
            f"{format_ratio(split['jax'])} x stepping {format_ratio(split['stepping'])} x loops "
            f"{format_ratio(split['loops'])}. Stepping alone ({own['num_envs']} envs, "
            f"{own['steps_per_call']} steps a call, env-steps/s): brax's own step "
            f"{format_rate(own['sps'])} under jax {_jax(own)} (its venv), "
            f"{format_rate(here['sps'])} under jax {_jax(here)} (jaxsim's); jaxsim's rollout "
            f"through its adapter {format_rate(ours['sps'])}. Each loop keeps of its stepping: "
            f"jaxsim {format_ratio(case['jaxsim']['sps'] / ours['sps'])}, brax "
            f"{format_ratio(case['brax']['steady_sps'] / own['sps'])}."
        )
    return lines


def summary(record: dict[str, Any]) -> str:
    """The record as a table, with the split of any speed gap measured (`split_lines`)."""
    return "\n\n".join([format_table(HEADERS, rows(record)), *split_lines(record)])


def peers_section(r, base: Path, plot: Path | None = None) -> str:
    from benchmarks.report.markdown import provenance_block

    d = r.data
    parts = [f"### Against the JAX peers: {r.device}", provenance_block(r, base)]
    if d.get("smoke"):
        parts.append("**`--smoke` record: tiny budgets, one seed; nothing here is a result.**")
    parts.append(
        "Each peer ran in a venv of its own (its jax named in the table) as a subprocess of the "
        "same run on the same CPU. Solved means solved on both sides: the deterministic stop "
        "check reached the target and an independent deterministic evaluation of at least 32 "
        "episodes (keys apart) did too. Times are training wall-clock (compile in, evaluations "
        "out); the speed rows are training env-steps/s at brax's published PPO settings "
        "(inverted_pendulum, ant) with both sides on 64-64 networks; brax_ppo_solve is one "
        "seed each, brax's trainer at its published settings and networks beside jaxsim's PPO "
        "preset for the env where there is one (records since 2026-12-02; before, brax's "
        "settings on 64-64 networks: the case's `settings` says which); brax_sac_solve is "
        "per seed, brax's trainer at its SAC test's settings (one process per seed) beside "
        "jaxsim's SAC preset (every seed at once, its time / seeds); the sbx rows are whole "
        "processes per seed as users run them (start to exit: imports, compile and "
        "evaluations in). Load: the 1-minute load average beside each figure."
    )
    parts.append(summary(d))
    return "\n\n".join(parts)


_COMPARISON = (("comparison", s.DICT), ("comparison.ratio", s.optional(s.positive)))


def args(p: Plan) -> list[str]:
    if p.mode == "smoke":
        return ["--smoke", "--cases", "rejax_ppo"]  # rejax's compile is the cheapest peer's
    if p.mode == "quick":
        return ["--cases", "brax_ppo_speed,rejax_ppo", "--seeds", "1"]
    return []


def problems(data: dict[str, Any]) -> list[str]:
    cases = data.get("cases")
    if not isinstance(cases, dict) or not cases:
        return ["field 'cases' must be a non-empty dict of case -> result"]
    found = []
    for name, case in cases.items():
        if not isinstance(case, dict):
            found.append(f"field 'cases.{name}' must be a dict")
        elif not any(status in case for status in NOT_MEASURED):
            found += s.check(case, f"cases.{name}", _COMPARISON)
    return found


SUITE = Suite(
    name="peers",
    module="benchmarks.peers.measure",
    title="jaxsim's agents beside brax's trainers, rejax and SBX (JAX peers, own venvs)",
    heading="## Against the JAX peers: brax's trainer and rejax",
    problems=problems,
    section=peers_section,
    args=args,
    no_record=(
        "Not measured (no peers record: `bash benchmarks/peers/setup_envs.sh` makes the peers' "
        "venvs, then `python -m benchmarks.peers.measure` writes one)."
    ),
)
