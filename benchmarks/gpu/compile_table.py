"""The compile record as the table `backend="auto"` reads: `jaxsim.fused.compile_record.MEASURED`
from the rows of `benchmarks.gpu.hopper_compile`'s records (`python -m benchmarks.gpu.hopper_compile
--table RECORD` prints it, to paste into compile_record.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

from benchmarks.gpu.cases import MLP_HIDDEN, Case, family


def case_of(row: dict[str, Any]) -> Case:
    """The `Case` a record's row measured."""
    fields = {f.name for f in dataclasses.fields(Case)}
    spec = {k: v for k, v in row.items() if k in fields}
    spec["make_kwargs"] = tuple(row["make_kwargs"].items())
    spec["hidden"] = tuple(row.get("hidden", MLP_HIDDEN))
    return Case(**spec)


def measured(row: dict[str, Any]):
    """A record's row as `jaxsim.fused.compile_record.Measured`: an ok row's figures; a timed-out
    row's CPU bound (or, killed on wall time, the CPU-seconds its compile had used), or the
    CPU-seconds a failing one took."""
    from jaxsim.fused.compile_record import Measured

    case = case_of(row)
    config = dict(block_envs=case.block_envs, num_warps=case.num_warps)
    if row["status"] == "ok":
        figures = (row["compile_cpu_s"], row["spill_store_bytes"], row["shared_bytes"])
    elif row.get("bound") == "wall":  # killed on wall time: the CPU-seconds its compile had
        before = sum(row["stage_cpu_s"].get(stage, 0.0) for stage in ("lower", "extract"))
        figures = (row["total_cpu_s"] - before, None, None)
    else:
        figures = (row.get("bound_s") or sum(row["stage_cpu_s"].values()), None, None)
    return Measured(row["status"], round(figures[0], 1), *figures[1:], **config)


def measured_rows(records: list[dict[str, Any]]) -> dict[tuple, Any]:
    """`jaxsim.fused.compile_record.MEASURED` from the records' rows: per family, of its rows
    at the default steps per launch, outputs and MLP first layer, the one meeting the targets
    with the most environments per block (then the quickest to compile); where none does, the
    one at `FusedConfig()`'s block_envs and num_warps (a family without one is left out)."""
    default = Case("", "random")
    groups: dict[tuple, list[tuple[Case, dict]]] = {}
    for row in (r for record in records for r in record["cases"]):
        case = case_of(row)
        fixed = (case.steps_per_launch, case.outputs, case.mlp_first_layer)
        if fixed != (default.steps_per_launch, default.outputs, default.mlp_first_layer):
            continue  # for_family varies block_envs and num_warps only
        hidden = case.hidden if case.policy == "mlp" else ()
        groups.setdefault((family(case), case.policy, hidden), []).append((case, row))
    table = {}
    for key, rows in groups.items():
        good = [m for m in (measured(r) for _, r in rows) if m.meets_targets(key[0])]
        if good:
            table[key] = max(good, key=lambda m: (m.block_envs, -m.compile_s))
            continue
        tuning = (default.block_envs, default.num_warps)
        at_default = [r for c, r in rows if (c.block_envs, c.num_warps) == tuning]
        if at_default:
            table[key] = measured(at_default[-1])
    return table


def measured_source(measured: dict[tuple, Any]) -> str:
    """`MEASURED`'s entries as Python, to paste into compile_record.py (then ruff format)."""
    from jaxsim.fused.compile_record import DEFAULT_TUNING

    lines = []
    for key, m in sorted(measured.items()):
        args = [repr(m.status), repr(m.compile_s)]
        args += [f"{f}={getattr(m, f)!r}" for f in ("spill_bytes", "shared_bytes")]
        args = [a for a in args if not a.endswith("=None")]
        if (m.block_envs, m.num_warps) != DEFAULT_TUNING:
            args += [f"block_envs={m.block_envs}", f"num_warps={m.num_warps}"]
        lines.append(f"    {key!r}: Measured({', '.join(args)}),")
    return "\n".join(lines)
