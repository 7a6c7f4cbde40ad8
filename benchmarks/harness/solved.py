""" "Solved means solved" in the benchmarks: jaxsim's chunk reports and any trainer's checks,
judged by `agents.loop.confirmed`, with what each record says about it."""

from __future__ import annotations

from typing import Any

import numpy as np

# agents.loop.MIN_EPISODES, written here so the reports read it without importing jax (the
# front door's registry must not); test_bench_solved holds the two equal.
MIN_EPISODES = 32

CONFIRM_SEED_OFFSET = 20_000
"""A baseline's confirming environment is seeded `CONFIRM_SEED_OFFSET + seed`, apart from its
stop check's (`10_000 + seed`) and its training environments' (`seed`)."""

RULE = (
    "a seed counts as solved when its stop check's deterministic evaluation reaches the target "
    f"and an independent deterministic evaluation (>= {MIN_EPISODES} episodes, keys or env "
    "seeds apart from the stop check's) also does (agents.loop.confirmed); a check the "
    "independent evaluation does not confirm is recorded as rejected and training goes on"
)


def judge(check_return: float, independent_returns, target: float) -> dict[str, Any]:
    """One stop check that reached `target`, judged by the rule: the curve point's fields."""
    from agents.loop import confirmed

    returns = np.asarray(independent_returns, dtype=float).reshape(-1)
    return {
        "confirm_return": float(returns.mean()),
        "confirm_episodes": int(returns.size),
        "solved": confirmed(check_return, returns, target),
    }


class Confirmations:
    """What `agents.loop.run_chunks`' reports say about confirmation, kept for a record: the
    independent evaluation's mean return that confirmed each seed, and every stop check it did
    not confirm (`rejected`). Call `observe(report, step)` from `on_chunk`."""

    def __init__(self, seeds: int):
        self.confirm_return: list[float | None] = [None] * seeds
        self.rejected: list[dict[str, Any]] = []
        self._solved = [False] * seeds

    def observe(self, report, step: int) -> None:
        if report.confirm_returns is None:
            return
        for s, value in enumerate(report.confirm_returns):
            if np.isnan(value) or self._solved[s]:
                continue
            if report.solved_update[s] is not None:
                self._solved[s] = True
                self.confirm_return[s] = float(value)
            else:
                check = float(report.eval_returns[s])
                self.rejected.append(
                    {"seed": s, "step": step, "check_return": check, "confirm_return": float(value)}
                )

    def fields(self, solved_update: list[int | None]) -> dict[str, Any]:
        """The record's fields: per seed solved or not, the confirming returns, rejections."""
        return {
            "solved_rule": RULE,
            "solved_per_seed": [u is not None for u in solved_update],
            "confirm_return_per_seed": list(self.confirm_return),
            "rejected_checks": list(self.rejected),
        }


def first_solved(curve: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first point of a baseline's curve whose check was confirmed (`judge`)."""
    return next((p for p in curve if p.get("solved")), None)


# ------------------------------------------------------------------------- records and reports
def solved_cell(run: dict[str, Any], steps_key: str) -> str:
    """A report's "solved" cell: seeds solved by the rule out of the seeds, or, for a record from
    before the rule (no "solved_per_seed"), the stop check's count said as such."""
    steps = run.get(steps_key) or []
    flags = run.get("solved_per_seed")
    if flags is None:
        return f"{sum(s is not None for s in steps)}/{len(steps)} (stop check only)"
    return f"{sum(bool(f) for f in flags)}/{len(flags)}"


def _where(rejected: dict[str, Any]) -> str:
    """Where a rejected check was: seed and env steps (records of the decoupled command from
    before it wrote them name the update alone)."""
    at = f"{rejected['step']:,} steps" if "step" in rejected else f"update {rejected['update']}"
    return f"seed {rejected['seed']} at {at}" if "seed" in rejected else f"at {at}"


def rejected_note(name: str, rejected: list[dict[str, Any]]) -> str | None:
    """A report's line on the checks the independent evaluation did not confirm, if any."""
    if not rejected:
        return None
    shown = "; ".join(
        _where(r) + f": check {r['check_return']:.1f}, confirmation {r['confirm_return']:.1f}"
        for r in rejected[:4]
    )
    more = f" and {len(rejected) - 4} more" if len(rejected) > 4 else ""
    return (
        f"{name}: {len(rejected)} stop check(s) at the target were not confirmed by the "
        f"independent evaluation, so training went on ({shown}{more})."
    )


def problems(run: Any, where: str, steps_key: str) -> list[str]:
    """What a record's run says against itself about solved seeds: "solved_per_seed" (absent in
    records from before the rule) must be one bool per seed and agree with `steps_key` (the
    steps at which each seed was solved, None where it was not)."""
    if not isinstance(run, dict) or "solved_per_seed" not in run:
        return []
    flags, steps = run["solved_per_seed"], run.get(steps_key)
    if not isinstance(flags, list) or not all(isinstance(f, bool) for f in flags):
        return [f"field '{where}.solved_per_seed' is {flags!r}, not a list of bools"]
    if not isinstance(steps, list) or [s is not None for s in steps] != flags:
        return [
            f"field '{where}.solved_per_seed' is {flags!r} but '{where}.{steps_key}' is "
            f"{steps!r}: a seed is solved exactly where it has steps to the target"
        ]
    return []


def rejected_in(curve: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """A baseline's checks at the target that were not confirmed (`judge`), as
    `Confirmations.rejected` lists jaxsim's."""
    keys = {"step": "step", "check_return": "mean_return", "confirm_return": "confirm_return"}
    return [
        {"seed": seed, **{k: p[v] for k, v in keys.items()}}
        for p in curve
        if p.get("solved") is False
    ]


def under_rule(runs: list[dict[str, Any]], marker: str = "solved_per_seed") -> bool:
    """Whether records' runs were judged by the rule (they carry `marker`); older ones were
    judged by their stop check alone."""
    return bool(runs) and all(marker in r for r in runs)


def rule_sentence(judged_by_rule: bool) -> str:
    """What "solved" means in a report section of records judged (or not) by the rule."""
    if judged_by_rule:
        return f"Solved: {RULE}."
    return (
        "Solved: by the stop check alone (records from before a seed had to be confirmed by an "
        "independent evaluation; rerun the suite to judge them by agents.loop.confirmed)."
    )
