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

from benchmarks.gpu.lowering import TRITON_CALL
from benchmarks.harness.paths import REPO_ROOT

POLICIES = ("random", "open_loop", "mlp")
MLP_HIDDEN = (64, 64)  # the benchmarks' actor-critic (benchmarks.fusion.measure)
NUM_STAGES = 3  # what jax's Pallas Triton lowering asks for on CUDA when none is given
ARCH = 90  # sm_90: H100 / H200
STAGES = ("lower", "extract", "ttir", "ttgir", "llir", "ptx", "cubin")


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


def family(case: Case) -> str:
    """The case's environment family as `jaxsim.fused.compile_record` names it."""
    import jaxsim
    from jaxsim.fused.compile_record import env_family

    return env_family(jaxsim.make(case.env_id, **dict(case.make_kwargs)))


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


# ------------------------------------------------------------ the table backend="auto" reads
# `jaxsim.fused.compile_record.MEASURED` from the rows of these records (`--table RECORD`
# prints it, to paste into compile_record.py).
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
