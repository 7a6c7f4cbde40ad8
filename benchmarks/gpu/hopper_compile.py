"""The fused kernel compiled to sm_90 machine code with no GPU: compile seconds, registers, spills.

Usage (RECORD: benchmarks/results/hopper_compile_cpu2_vm.json, which compile_record reads):
  python -m benchmarks.gpu.hopper_compile --cases small                     # a quick look
  python -m benchmarks.gpu.hopper_compile --cases default extra sweep --out RECORD
  python -m benchmarks.gpu.hopper_compile --case MinAtar/Breakout-v0:mlp:32:4 --out RECORD --append
  python -m benchmarks.gpu.hopper_compile --table RECORD   # compile_record.MEASURED's rows

Per case (an environment, a policy, `FusedConfig`'s block_envs, num_warps and steps_per_launch),
in a subprocess of its own whose CPU time is capped at --timeout-s CPU-seconds (RLIMIT_CPU, which
its ptxas inherits: a busy shared machine does not shorten the bound), and whose process group is
killed after 3 x that plus a minute of wall time. A case over either is `timed_out`, with its
bound and the stage it was in. The stages:
  lower    the fused rollout lowered for CUDA inside an abstract H200 mesh (`lowering.py`);
  extract  the Triton IR that jax's Pallas lowering puts in the `__gpu$xla.gpu.triton` custom
           call (MLIR bytecode in its backend config, key "ir"), printed as text by jaxlib's own
           MLIR (the `triton` wheel's MLIR cannot read jaxlib's bytecode, but reads its text);
  compile  triton's CUDA pipeline for GPUTarget("cuda", 90, 32) with the kernel's num_warps and
           jax's num_stages (3), every stage timed: ttir (its cleanup passes, which
           `triton.compile` would skip for a .ttir file but XLA runs), ttgir, llir, ptx, and
           cubin (ptxas -v, whose log gives registers, spill stores and loads, stack frame).
Shared memory is Triton's own figure (`metadata["shared"]`: dynamic shared memory per program).

A proxy, not the GPU's own compile: on a GPU, XLA compiles the same IR with the Triton it
bundles and its own pass pipeline, close to this one but not identical. Compile seconds are
CPU-seconds of this process and its ptxas. Needs the `hopper` extra (`triton==3.6.0`, the GPU
image's Triton, which ships ptxas); runs on any x86-64 Linux CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import math
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.gpu.cases import CASE_SETS, MLP_HIDDEN, Case, family
from benchmarks.gpu.compile_table import measured_rows, measured_source
from benchmarks.gpu.lowering import TRITON_CALL
from benchmarks.harness.paths import REPO_ROOT

NUM_STAGES = 3  # what jax's Pallas Triton lowering asks for on CUDA when none is given
ARCH = 90  # sm_90: H100 / H200
STAGES = ("lower", "extract", "ttir", "ttgir", "llir", "ptx", "cubin")


# ------------------------------------------------------------------------- inside the subprocess
def lower_case(case: Case):
    """The case's fused rollout (one launch of `steps_per_launch` steps, two blocks) lowered
    for CUDA: a `jax.stages.Lowered`."""
    import jax

    import jaxsim
    from benchmarks.gpu.lowering import lower_for_cuda
    from jaxsim import FusedConfig

    env = jaxsim.make(case.env_id, **dict(case.make_kwargs))
    config = FusedConfig(
        case.block_envs, case.steps_per_launch, num_warps=case.num_warps, interpret=False,
        mlp_first_layer=case.mlp_first_layer,
    )  # fmt: skip
    n, num_envs = case.steps_per_launch, 2 * case.block_envs
    space = env.action_space(env.default_params)
    actions = jax.ShapeDtypeStruct((n, num_envs, *space.shape), space.dtype)

    def run(key, actions):  # policies are made inside: traced, never run in the abstract mesh
        if case.policy == "random":
            policy = jaxsim.random_policy(env)
        elif case.policy == "open_loop":
            policy = jaxsim.OpenLoopPolicy(actions)
        else:
            policy = jaxsim.init_mlp_policy(jax.random.key(0), env, hidden=case.hidden)
        return jaxsim.rollout(
            env, policy, n, num_envs=num_envs, key=key, backend="fused", fused_config=config,
            outputs=case.outputs,
        )  # fmt: skip

    return lower_for_cuda(run, jax.random.key(0), actions)


def triton_calls(lowered) -> list[dict[str, Any]]:
    """Each `__gpu$xla.gpu.triton` custom call's backend config: name, num_warps, num_stages and
    the kernel's Triton IR as text (its bytecode read back by jaxlib's MLIR)."""
    from jax._src.lib.mlir import ir
    from jax._src.pallas.triton.lowering import _new_ir_context  # jaxlib's MLIR with `tt`

    calls = []

    def visit(op):
        if op.name == "stablehlo.custom_call":
            target = ir.StringAttr(op.attributes["call_target_name"]).value
            if target == TRITON_CALL:
                config = ir.DictAttr(op.attributes["mhlo.backend_config"])
                calls.append({
                    "name": ir.StringAttr(config["name"]).value,
                    "num_warps": ir.IntegerAttr(config["num_warps"]).value,
                    "num_stages": ir.IntegerAttr(config["num_stages"]).value,
                    "bytecode": ir.StringAttr(config["ir"]).value_bytes,
                })  # fmt: skip
        for region in op.regions:
            for block in region.blocks:
                for child in block.operations:
                    visit(child.operation)

    visit(lowered.compiler_ir("stablehlo").operation)
    with _new_ir_context():
        for call in calls:
            module = ir.Module.parse(call.pop("bytecode"))
            call["ttir"] = module.operation.get_asm(enable_debug_info=False)
    return calls


_PTXAS = {
    "stack_frame_bytes": r"(\d+) bytes stack frame",
    "spill_store_bytes": r"(\d+) bytes spill stores",
    "spill_load_bytes": r"(\d+) bytes spill loads",
    "n_regs": r"Used (\d+) registers",
    "ptxas_ms": r"Compile time = ([\d.]+) ms",
}


def parse_ptxas_log(log: str) -> dict[str, float | int | None]:
    """Registers, spills and stack frame from `ptxas -v`'s log (None where absent)."""
    out: dict[str, float | int | None] = {}
    for key, pattern in _PTXAS.items():
        m = re.search(pattern, log)
        out[key] = None if m is None else (float if "." in m.group(1) else int)(m.group(1))
    return out


def _cpu_s() -> float:
    """CPU-seconds of this process and its waited-for children (ptxas)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def compile_ttir(ttir: str, num_warps: int, num_stages: int, emit) -> dict[str, Any]:
    """Triton IR text compiled for sm_90 by triton's CUDA backend, stage by stage.

    `emit(event)` is called after each stage (so a killed compile leaves its progress behind).
    Returns shared memory, registers, spills, stack frame and per-stage CPU-seconds.
    """
    os.environ["TRITON_DUMP_PTXAS_LOG"] = "1"  # make_cubin prints ptxas -v's log
    import triton
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget, Language
    from triton.compiler.compiler import make_backend

    target = GPUTarget("cuda", ARCH, 32)
    backend = make_backend(target)
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    with tempfile.NamedTemporaryFile("w", suffix=".ttir") as f:
        f.write(ttir)
        f.flush()
        module = ir.parse_mlir_module(f.name, context)
    module.context = context  # as triton.compile's IRSource.make_ir does
    options = backend.parse_options({"num_warps": num_warps, "num_stages": num_stages})
    stages: dict = {}
    backend.add_stages(stages, options, Language.TRITON)
    metadata = {"target": target, **options.__dict__}
    log = io.StringIO()
    stage_s = {}
    sizes = {"ttir_lines": ttir.count("\n")}
    for stage, run in stages.items():
        start = _cpu_s()
        with contextlib.redirect_stdout(log):
            module = run(module, metadata)
        stage_s[stage] = round(_cpu_s() - start, 3)
        if stage in ("llir", "ptx"):
            sizes[f"{stage}_lines"] = str(module).count("\n")
        emit({"event": "stage", "stage": stage, "cpu_s": stage_s[stage]})
    return {
        "shared_bytes": metadata["shared"],
        **parse_ptxas_log(log.getvalue()),
        "stage_cpu_s": stage_s,
        "compile_cpu_s": round(sum(stage_s.values()), 3),
        **sizes,
        "triton": triton.__version__,
    }


def child(case: Case, cpu_limit_s: float | None = None) -> None:
    """One case, its progress and result as JSON lines on stdout; past `cpu_limit_s`
    CPU-seconds (this process, or its ptxas on its own) the kernel ends it with SIGXCPU."""
    if cpu_limit_s is not None:
        limit = math.ceil(cpu_limit_s)
        resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 5))

    def emit(event):
        print(json.dumps(event), flush=True)

    emit({"event": "family", "family": family(case)})
    start = _cpu_s()
    lowered = lower_case(case)
    emit({"event": "stage", "stage": "lower", "cpu_s": round(_cpu_s() - start, 3)})
    start = _cpu_s()
    calls = triton_calls(lowered)
    emit({"event": "stage", "stage": "extract", "cpu_s": round(_cpu_s() - start, 3)})
    if len(calls) != 1:
        raise RuntimeError(f"expected one Triton kernel in the lowered rollout, got {len(calls)}")
    (call,) = calls
    if call["num_warps"] != case.num_warps:
        raise RuntimeError(f"the custom call asks for {call['num_warps']} warps, not the case's")
    result = compile_ttir(call["ttir"], call["num_warps"], call["num_stages"], emit)
    emit({"event": "result", "kernel": call["name"], "num_stages": call["num_stages"], **result})


# ------------------------------------------------------------------------------------ the parent
def run_case(case: Case, timeout_s: float) -> dict[str, Any]:
    """`case` compiled in a subprocess of at most `timeout_s` CPU-seconds (its own process
    group, killed whole after 3 * timeout_s + 60 wall seconds).

    Returns the row: status "ok" (with the compile's figures), "timed_out" (with `bound_s`
    and `bound`, "cpu" or "wall", the stages finished and the one running) or "failed" (with
    the reason).
    """
    row: dict[str, Any] = {"case": case.name, **dataclasses.asdict(case)}
    row["make_kwargs"] = dict(case.make_kwargs)
    if case.policy != "mlp":
        del row["hidden"], row["mlp_first_layer"]
    spec = json.dumps(dataclasses.asdict(case))
    cmd = [sys.executable, "-m", "benchmarks.gpu.hopper_compile", "--child", spec]
    cmd += ["--timeout-s", str(timeout_s)]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT,
        start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=3 * timeout_s + 60)
        wall_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # ptxas, a grandchild, goes too
        out, err = proc.communicate()
        wall_out = True
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    row["wall_s"] = round(time.perf_counter() - started, 2)
    row["total_cpu_s"] = round(
        (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2
    )
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    row["family"] = next((e["family"] for e in events if e["event"] == "family"), None)
    done = {e["stage"]: e["cpu_s"] for e in events if e["event"] == "stage"}
    row["stage_cpu_s"] = done
    result = next((e for e in events if e["event"] == "result"), None)
    # SIGXCPU: the child's own CPU limit; ptxas's ("error code -24") fails the child's compile.
    cpu_out = proc.returncode == -signal.SIGXCPU or f"error code -{int(signal.SIGXCPU)}" in err
    if wall_out or (cpu_out and result is None):
        running = next((s for s in STAGES if s not in done), None)
        bound = "wall" if wall_out else "cpu"
        bound_s = 3 * timeout_s + 60 if wall_out else timeout_s
        row.update(status="timed_out", bound=bound, bound_s=bound_s, running_stage=running)
    elif result is None or proc.returncode != 0:
        failed_stage = next((s for s in STAGES if s not in done), None)
        reason = _failure(err) or f"exit {proc.returncode}"
        row.update(status="failed", failed_stage=failed_stage, reason=reason)
    else:
        del result["event"]
        row.update(status="ok", **result)
        row["stage_cpu_s"] = {**done, **result["stage_cpu_s"]}
    return row


def _failure(stderr: str) -> str:
    """The compiler's own error lines (MLIR diagnostics, ptxas), else the traceback's last."""
    lines = stderr.strip().splitlines()
    errors = [line.strip()[:300] for line in lines if ": error:" in line or "ptxas" in line]
    return " | ".join(errors[:3] or lines[-1:])[:1500]


def tool_versions() -> dict[str, str | None]:
    """triton's and its ptxas's versions (None where triton is absent)."""
    try:
        import triton
        from triton import knobs
    except ImportError:
        return {"triton": None, "ptxas": None}
    ptxas = knobs.nvidia.ptxas.path
    text = subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release ([\d.]+), V([\d.]+)", text)
    return {"triton": triton.__version__, "ptxas": m.group(2) if m else text.strip()[-80:]}


def _cell(x, fmt="{}"):
    return "–" if x is None else fmt.format(x)


def render(rows: list[dict[str, Any]]) -> str:
    from benchmarks.harness.formatting import format_table

    table = []
    for r in rows:
        if r["status"] == "ok":
            compile_s = f"{r['compile_cpu_s']:.1f}"
        elif r["status"] == "timed_out":
            compile_s = f"> {r['bound_s']:g} ({r['running_stage']})"
        else:
            compile_s = "failed"
        table.append([
            r["case"], compile_s, _cell(r.get("shared_bytes")), _cell(r.get("n_regs")),
            _cell(r.get("spill_store_bytes")), _cell(r.get("stack_frame_bytes")),
        ])  # fmt: skip
    headers = ["case", "compile CPU-s", "smem B", "regs", "spill stores B", "stack B"]
    return format_table(headers, table)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu.hopper_compile",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--cases", nargs="+", choices=sorted(CASE_SETS), default=[], help="named sets")
    p.add_argument("--case", action="append", default=[], help="ENV[:POLICY[:BLOCK[:WARPS]]]")
    p.add_argument("--timeout-s", type=float, default=120.0, help="per case, CPU-seconds")
    p.add_argument("--out", type=Path, help="JSON record (default: print only)")
    p.add_argument(
        "--append", action="store_true", help="add to --out's record (same cases: replaced)"
    )
    p.add_argument("--table", nargs="+", type=Path, help="records: print compile_record's rows")
    p.add_argument("--child", help=argparse.SUPPRESS)  # one case, inside its subprocess
    args = p.parse_args(argv)
    if args.table:
        print(measured_source(measured_rows([json.loads(p.read_text()) for p in args.table])))
        return 0
    if args.child:
        spec = json.loads(args.child)
        spec["make_kwargs"] = tuple(tuple(kv) for kv in spec["make_kwargs"])
        spec["hidden"] = tuple(spec.get("hidden", MLP_HIDDEN))
        child(Case(**spec), args.timeout_s)
        return 0
    cases = [*(c for name in args.cases for c in CASE_SETS[name]), *map(Case.parse, args.case)]
    if not cases:
        p.error("give --cases or --case")
    versions = tool_versions()
    if versions["triton"] is None:
        p.error("triton is not installed: pip install -e '.[hopper]'")

    from benchmarks.harness.provenance import provenance
    from benchmarks.harness.record import append_jsonl, finish

    started = time.perf_counter()
    partial = None if args.out is None else args.out.with_name(args.out.stem + ".partial.jsonl")
    if partial is not None:
        partial.unlink(missing_ok=True)
    rows = []
    for case in cases:
        rows.append(run_case(case, args.timeout_s))
        r = rows[-1]
        detail = r.get("compile_cpu_s", r.get("running_stage", r.get("reason", "")))
        print(f"  {case.name}: {r['status']} {detail} (wall {r['wall_s']} s)", flush=True)
        if partial is not None:
            append_jsonl(partial, r)
    run = {
        "provenance": provenance(("triton",)),
        "timeout_cpu_s": args.timeout_s,
        "wall_s": round(time.perf_counter() - started, 1),
        "cases": [r["case"] for r in rows],
    }
    record = {
        "benchmark": "hopper_compile",
        "target": f"cuda sm_{ARCH} (GPUTarget('cuda', {ARCH}, 32)), num_stages {NUM_STAGES}",
        "tools": versions,
        "wall_s": run["wall_s"],
        "runs": [run],
        "cases": rows,
    }
    if args.out is None:
        print(render(rows))
        return 0
    if args.append and args.out.exists():
        old = json.loads(args.out.read_text())
        if old["tools"] != versions:
            p.error(f"--append: {args.out} was measured with {old['tools']}, not {versions}")
        names = set(run["cases"])
        record["runs"] = [*old["runs"], run]
        record["cases"] = [*(r for r in old["cases"] if r["case"] not in names), *rows]
    # A compiler's failure is a measurement; a failure to lower or extract is this tool's.
    failed = [r["case"] for r in rows if r.get("failed_stage") in ("lower", "extract")]
    return finish(record, args.out, render(record["cases"]), failed, partial)


if __name__ == "__main__":
    raise SystemExit(main())
