"""The minatar suite: jaxsim's native MinAtar games beside gymnax's and the original package."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness.formatting import format_rate, format_ratio, format_table
from benchmarks.harness.suite import Plan, Suite
from benchmarks.report import schema as s
from benchmarks.report.markdown import provenance_block
from benchmarks.report.records import Record

_LOOPS = ("jaxsim", "reuse", "dynamics", "gymnax", "adapter", "original", "fused")
# Each loop's ratio in the record: jaxsim's native game over it; the kernel, out= reuse and the
# game without observations over the scan with fresh buffers.
_RATIO = {"gymnax": "jaxsim / gymnax", "adapter": "jaxsim / adapter",
          "original": "jaxsim / original", "fused": "fused / scan",
          "reuse": "out= / scan", "dynamics": "no obs / scan"}  # fmt: skip
# With a reuse row: its own ratios to gymnax and the original (the same targets); with a
# dynamics row, its ratio to the original (the ceiling of the observation-keeping rows).
_REUSE_RATIOS = ("jaxsim out= / gymnax", "jaxsim out= / original")
_DYNAMICS_RATIOS = ("no obs / original",)


def minatar_section(r: Record, base: Path, plot: Path | None = None) -> str:
    d = r.data
    parts = [
        f"### MinAtar, random policy, observations kept: {r.device}",
        provenance_block(r, base),
    ]
    parts.append(
        'env-steps/s of jaxsim\'s native game (`jaxsim.make("MinAtar/<Game>-v0")`, scan '
        "backend), gymnax's same game in its own jit(scan(vmap(step))), jaxsim's gymnax adapter "
        '(`jaxsim.make("gymnax/<Game>-MinAtar")`), timed in alternation, and the original '
        "`minatar` package in Gymnasium's SyncVectorEnv. Every loop keeps every step's "
        "observation. Targets: jaxsim / gymnax >= 3, jaxsim / original >= 100. On a GPU, "
        "*fused*: the native game on the fused backend, timed in turn with the scan. *reuse* "
        "(records since the grid became bool): the native game with `rollout(..., out=previous)`"
        ", writing into the previous call's buffers. *dynamics* (records since 2026-12-02): the "
        "same call keeping rewards and flags only, no observation: the game's step alone, a "
        "bound on what the rows that keep observations can reach (*no obs / original* is that "
        "bound's ratio, information, not a result)."
    )
    points = d.get("results", [])
    by = {(p["game"], p["impl"]): p for p in points}
    ratio = {(t["game"], t["name"]): t for t in d.get("targets", [])}
    games = list(dict.fromkeys(p["game"] for p in points))
    loops = [impl for impl in _LOOPS if any(p["impl"] == impl for p in points)]
    names = [_RATIO[impl] for impl in loops[1:]]
    names += list(_REUSE_RATIOS) if "reuse" in loops else []
    names += list(_DYNAMICS_RATIOS) if "dynamics" in loops else []
    rows = []
    for game in games:
        cells = []
        for impl in loops:
            p = by.get((game, impl))
            ok = p is not None and p["status"] == "ok"
            cells.append(
                format_rate(p["steps_per_s"]["median"]) if ok else (p or {}).get("status", "–")
            )
        for name in names:
            t = ratio.get((game, name))
            cells.append(f"{format_ratio(t['value'])} ({t['status']})" if t else "–")
        n = by.get((game, "jaxsim"), {}).get("num_envs", "")
        rows.append([game, n, *cells])
    headers = ["game", "N", *loops, *names]
    parts.append(format_table(headers, rows))
    notes = [
        f"- {p['game']} {p['impl']}: {p['status']}: {p.get('reason')}"
        for p in points
        if p["status"] != "ok"
    ]
    if notes:
        parts.append("\n".join(notes))
    return "\n\n".join(parts)


def args(p: Plan) -> list[str]:
    # The JAX baselines are gymnax (its own loop and jaxsim's adapter of it); the original
    # package is stepped through Gymnasium's SyncVectorEnv.
    # jaxsim's own rows beside the fresh scan loop (out= reuse, and the game without
    # observations: the bound) in full runs, the ones records are published from; the main
    # job's quick run keeps its few minutes.
    impls = ["reuse", "dynamics"] if p.mode == "full" else []
    impls += ["gymnax", "adapter"] if "gymnax" in p.baselines else []
    impls += ["original"] if "gymnasium_sync" in p.baselines else []
    impls += ["fused"] if p.on_gpu else []  # on a CPU the kernel is interpreted: tests only
    selected = ["--impls", ",".join(impls) or "none"]
    if p.mode == "smoke":
        return [*selected, *("--games Breakout --num-envs 8 --steps 4 --repeats 1 "
                "--original-envs 2 --original-steps 3 --original-repeats 1").split()]  # fmt: skip
    # Quick: Breakout, the game the adapters suite also measures; full runs play all five.
    return [*selected, *(["--quick", "--games", "Breakout"] if p.mode == "quick" else [])]


def problems(data: dict[str, Any]) -> list[str]:
    point = (("game", s.STR), ("impl", s.STR), ("num_envs", s.INT), ("status", s.STR))
    ok = (*s.TIMED, ("steps", s.INT), ("checks", s.DICT))
    return s.points(data, point, ok, (("reason", s.STR),))


SUITE = Suite(
    name="minatar",
    module="benchmarks.minatar.measure",
    title="MinAtar natively: jaxsim's five games beside gymnax, its adapter and the original",
    heading="## MinAtar: native games beside gymnax and the original",
    problems=problems,
    section=minatar_section,
    args=args,
)
