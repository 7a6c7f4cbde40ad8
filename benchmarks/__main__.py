"""One front door to the benchmarks: `python -m benchmarks run --quick`, then `... report`.

Usage:
  python -m benchmarks run --quick                 # every suite, a few minutes on 2 CPU cores
  python -m benchmarks run --full                  # the recorded run (an hour or more on 2 cores)
  python -m benchmarks run --suite throughput --suite fusion --baselines gymnax,torch
  python -m benchmarks run --smoke --out /tmp/b    # tiny sizes: checks the pipeline, not a result
  python -m benchmarks report                      # RESULTS.md, plots and README from the records
  python -m benchmarks list                        # suites and baselines, and which are installed

Each suite runs as its own process (`python -m benchmarks.<module> ...`, sizes chosen per mode)
and writes its JSON record, with provenance, atomically into the output directory; a suite whose
module is missing, that fails or that times out is recorded as skipped or failed with the reason,
and the run carries on. `runs.jsonl` in the output directory gets one appended line per suite
(status, reason, record, command, wall time), so an interrupted run keeps every finished record.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime
import importlib.util
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results"
MANIFEST = "runs.jsonl"
MODES = ("smoke", "quick", "full")
# Seconds a suite may run before it is stopped and recorded as failed.
TIMEOUT_S = {"smoke": 300, "quick": 900, "full": 3 * 3600}

# Baselines: name -> (what it is, the distribution that provides it, the suite that measures it).
BASELINES = {
    "gymnasium_sync": ("Gymnasium SyncVectorEnv", "gymnasium", "throughput, breakdown"),
    "gymnasium_async": ("Gymnasium AsyncVectorEnv", "gymnasium", "throughput"),
    "gymnasium_numpy": ("Gymnasium numpy-vectorized CartPole", "gymnasium", "throughput"),
    "envpool": ("EnvPool", "envpool", "throughput"),
    "gymnax": ("gymnax", "gymnax", "throughput"),
    "torch": ("eager-PyTorch vectorized CartPole", "torch", "throughput"),
    "sb3": ("Stable-Baselines3 PPO", "stable-baselines3", "ppo"),
}
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
    impls = ["jaxsim", *(b for b in THROUGHPUT_BASELINES if b in p.baselines), "physics_only"]
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


def _ppo_args(p: Plan) -> list[str]:
    sb3 = [] if "sb3" in p.baselines else ["--no-sb3"]
    if p.mode == "smoke":
        return ("--envs CartPole-v1 --seeds 1 --total-steps 1024 --eval-every 1 --no-sb3 "
                "--no-overhead --no-gpu-sps").split()  # fmt: skip
    if p.mode == "quick":
        # A real time-to-solve on CartPole (3 seeds at once), SB3 with one seed beside it.
        return ["--envs", "CartPole-v1", "--sb3-seeds", "1", "--no-overhead", *sb3]
    return sb3


def _breakdown_args(p: Plan) -> list[str]:
    cases = ["ppo_scan", "ppo_fused"]
    if "gymnasium_sync" in p.baselines:
        cases.append("gym_sync")
    if p.mode == "smoke":
        return ("--cases ppo_scan --num-envs 2 --num-steps 16 --update-epochs 1 "
                "--num-minibatches 1 --iterations 1 --repeats 1 --min-time 0").split()  # fmt: skip
    return ["--cases", ",".join(cases), *(["--quick"] if p.mode == "quick" else [])]


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
            "off-policy (DQN/SAC) time-to-solve",
            lambda p: [],
            missing_reason="no off-policy agent (DQN, SAC) exists in agents/ yet",
        ),
        Suite(
            "breakdown",
            "benchmarks.breakdown",
            "breakdown",
            "profiler breakdown of a PPO iteration (simulation, policy, learning, host)",
            _breakdown_args,
        ),
    )
}


class UsageError(Exception):
    """Bad input found before anything runs."""


# ---------------------------------------------------------------------------------- validation
def parse_names(text: str, valid, what: str) -> list[str]:
    """Comma-separated names (or 'all' / 'none'), each one of `valid`; else UsageError."""
    text = text.strip()
    if text == "all":
        return list(valid)
    if text in ("none", ""):
        return []
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in valid]
    if unknown:
        raise UsageError(
            f"unknown {what} {', '.join(map(repr, unknown))}; choose from "
            f"{', '.join(valid)} (or 'all', 'none')"
        )
    return names


def check_writable(out_dir: Path) -> Path:
    """Creates `out_dir` if needed and proves a file can be written there; else UsageError."""
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=out_dir, prefix=".write-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise UsageError(f"cannot write to output directory {str(out_dir)!r}: {e}") from None
    return out_dir.resolve()


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


# -------------------------------------------------------------------------------------- running
def _utc() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def probe_machine(timeout: float = 300) -> dict[str, Any]:
    """Machine tag and provenance, from a child process.

    Initialising jax here would hold the accelerator (and, on a GPU, most of its memory) while
    the suites run, so a short-lived child answers instead.
    """
    code = (
        "import json; from benchmarks._common import machine_tag, provenance; "
        "print(json.dumps({'machine_tag': machine_tag(), 'provenance': provenance()}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_child_env(),
    )
    if out.returncode != 0:
        raise RuntimeError(f"could not start jax in a child process:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _child_env() -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # Suites import `benchmarks` and `agents` from the repository, installed or not.
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    return env


def _fmt_s(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m}:{s:02d}"


class Progress:
    """Prints suite headers, each child's output under its suite with the elapsed time, and
    a line per finished suite; `quiet` keeps only the suite lines."""

    def __init__(self, total: int, quiet: bool, stream=None):
        self.total, self.quiet = total, quiet
        self.stream = stream or sys.stdout
        self.started = time.perf_counter()

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def start(self, i: int, suite: Suite, command: str) -> None:
        elapsed = _fmt_s(time.perf_counter() - self.started)
        self._print(f"[{i}/{self.total}] {suite.name}: {suite.title}  (total {elapsed})")
        if not self.quiet:
            self._print(f"    $ {command}")

    def line(self, suite: Suite, suite_started: float, text: str) -> None:
        if not self.quiet:
            elapsed = _fmt_s(time.perf_counter() - suite_started)
            self._print(f"    {suite.name} {elapsed} | {text.rstrip()}")

    def done(self, i: int, entry: dict[str, Any]) -> None:
        status = entry["status"].upper() if entry["status"] != "ok" else "ok"
        what = f" -> {entry['record']}" if entry.get("record") else ""
        why = f": {entry['reason']}" if entry.get("reason") else ""
        wall = f" in {entry['wall_s']:.1f} s" if entry.get("wall_s") is not None else ""
        self._print(f"[{i}/{self.total}] {entry['suite']}: {status}{wall}{what}{why}")


def record_path(out_dir: Path, suite: Suite, tag: str, mode: str) -> Path:
    suffix = "" if mode == "full" else f"_{mode}"
    return out_dir / f"{suite.record_stem}_{tag}{suffix}.json"


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def _valid_record(path: Path, before: int | None) -> str | None:
    """None if `path` holds a complete record with provenance written since `before` (its
    mtime then), else what is wrong. An older record there is kept, never counted."""
    if _mtime(path) is None or _mtime(path) == before:
        return "it wrote no record"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return "it wrote no record"
    except (OSError, json.JSONDecodeError) as e:
        return f"its record is unreadable: {e}"
    if not isinstance(data, dict) or "provenance" not in data or "benchmark" not in data:
        return "its record lacks 'benchmark' or 'provenance'"
    return None


def run_suite(
    suite: Suite, plan: Plan, out: Path, timeout_s: float, progress: Progress, i: int
) -> dict[str, Any]:
    """Runs one suite as a child process; returns its manifest entry (never raises for the
    suite's own failures; KeyboardInterrupt stops the child and propagates)."""
    entry: dict[str, Any] = {"suite": suite.name, "module": suite.module, "started_utc": _utc()}
    missing = suite_available(suite)
    if missing is not None:
        progress.start(i, suite, "(not run)")
        return {**entry, "status": "skipped", "reason": missing, "record": None}
    cmd = [sys.executable, "-m", suite.module, *suite.args(plan), "--out", str(out)]
    shown = shlex.join(["python", "-m", suite.module, *cmd[3:]])
    entry["command"] = shown
    progress.start(i, suite, shown)
    tail: collections.deque[str] = collections.deque(maxlen=25)
    before = _mtime(out)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=REPO_ROOT,
        env=_child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        start_new_session=True,  # its own process group: a timeout stops its helpers too
    )
    timed_out = threading.Event()

    def on_timeout():
        timed_out.set()
        _stop(proc)

    watchdog = threading.Timer(timeout_s, on_timeout)
    watchdog.daemon = True
    watchdog.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # ends when the child (or the watchdog) closes it
            tail.append(line.rstrip())
            progress.line(suite, t0, line)
        proc.wait()
    except KeyboardInterrupt:
        _stop(proc)
        raise
    finally:
        watchdog.cancel()
        proc.stdout.close()
    wall = time.perf_counter() - t0
    entry.update(returncode=proc.returncode, wall_s=round(wall, 1))
    problem = _valid_record(out, before)
    entry["record"] = None if problem else out.name
    if timed_out.is_set():
        entry.update(status="failed", reason=f"timed out after {timeout_s:.0f} s")
    elif proc.returncode != 0:
        kept = "its record was written" if problem is None else problem
        entry.update(status="failed", reason=f"exit status {proc.returncode} ({kept})")
    elif problem is not None:
        entry.update(status="failed", reason=f"exit status 0 but {problem}")
    else:
        entry["status"] = "ok"
    if entry["status"] != "ok":
        entry["output_tail"] = list(tail)
    return entry


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _stop(proc: subprocess.Popen) -> None:
    """SIGINT to the child's process group (so it can clean up), then SIGKILL."""
    for sig, wait in ((signal.SIGINT, 10), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue


def append_manifest(out_dir: Path, entry: dict[str, Any]) -> None:
    from benchmarks._common import append_jsonl  # imports jax, which stays uninitialised

    append_jsonl(out_dir / MANIFEST, entry)


def run(args) -> int:
    suites = parse_names(",".join(args.suite) if args.suite else "all", list(SUITES), "suite(s)")
    if not suites:
        raise UsageError("no suite selected")
    baselines = parse_names(args.baselines, list(BASELINES), "baseline(s)")
    mode = args.mode
    out_dir = check_writable(args.out)
    timeout_s = args.timeout_s or TIMEOUT_S[mode]

    started = time.perf_counter()
    run_id = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ") + f"-{os.getpid()}"
    print(
        f"benchmarks run {run_id}: mode {mode}, suites {', '.join(suites)}; "
        f"baselines {', '.join(baselines) or 'none'}; records -> {out_dir}",
        flush=True,
    )
    machine = probe_machine()
    prov = machine["provenance"]
    plan = Plan(mode, frozenset(baselines), prov["jax_backend"] == "gpu")
    print(
        f"machine {machine['machine_tag']}: {prov['device_kind']}, {prov['cpu_model']}, "
        f"{prov['cpu_count']} cores, load {prov['loadavg_1_5_15min']}; "
        f"jax {prov['versions']['jax']}; commit {prov['commit']}",
        flush=True,
    )
    if mode == "smoke":
        print("smoke mode: tiny sizes that check the pipeline; the figures are not results")
    base = {"run_id": run_id, "mode": mode, "machine_tag": machine["machine_tag"]}
    progress = Progress(len(suites), args.quiet)
    entries = []
    status = "ok"
    # SIGTERM (a CI timeout, `kill`) stops the run as Ctrl-C does: the suite's process group is
    # stopped too, and the manifest says so.
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        for i, name in enumerate(suites, 1):
            suite = SUITES[name]
            out = record_path(out_dir, suite, machine["machine_tag"], mode)
            entry = {**base, **run_suite(suite, plan, out, timeout_s, progress, i)}
            append_manifest(out_dir, entry)
            entries.append(entry)
            progress.done(i, entry)
    except KeyboardInterrupt:
        status = "interrupted"
        left = [n for n in suites if n not in {e["suite"] for e in entries}]
        entry = {
            **base,
            "suite": left[0] if left else None,
            "status": "interrupted",
            "reason": "stopped by Ctrl-C or SIGTERM",
            "started_utc": _utc(),
        }
        append_manifest(out_dir, entry)
        print(f"\ninterrupted: {len(entries)} finished suite record(s) kept in {out_dir}")
    finally:
        signal.signal(signal.SIGTERM, previous)
    wall = time.perf_counter() - started
    if status == "ok" and any(e["status"] == "failed" for e in entries):
        status = "failed"
    summary = {
        **base,
        "event": "run",
        "suite": None,
        "status": status,
        "suites": {e["suite"]: e["status"] for e in entries},
        "baselines": baselines,
        "wall_s": round(wall, 1),
        "command": shlex.join(["python", "-m", "benchmarks", *args.argv]),
        "provenance": prov,
    }
    append_manifest(out_dir, summary)
    print(f"\nrun {run_id} {status} in {_fmt_s(wall)}:")
    for e in entries:
        print(f"  {e['suite']:<11} {e['status']:<8} {e.get('record') or e.get('reason') or ''}")
    if status == "interrupted":
        return 130
    default_dir = out_dir == DEFAULT_OUT.resolve()
    if args.report:
        write_report(out_dir, default_dir)
    else:
        results = "" if default_dir else f" --results {shlex.quote(str(out_dir))}"
        print(f"\nnext: python -m benchmarks report{results}")
    return 1 if status == "failed" else 0


def write_report(out_dir: Path, default_dir: bool) -> None:
    """The report of `out_dir`'s records: benchmarks/RESULTS.md and the README's section for
    the default directory, else DIR/RESULTS.md only."""
    from benchmarks import report

    print()
    argv = ["--results", str(out_dir)]
    if not default_dir:
        argv += ["--out", str(out_dir / "RESULTS.md"), "--no-readme"]
    report.main(argv)


def list_things() -> int:
    print("suites (python -m benchmarks run --suite NAME):")
    for s in SUITES.values():
        missing = suite_available(s)
        print(f"  {s.name:<11} {s.title}" + (f"  [skipped: {missing}]" if missing else ""))
    print("\nbaselines (python -m benchmarks run --baselines a,b; default all):")
    import importlib.metadata

    for name, (what, dist, suite) in BASELINES.items():
        try:
            where = f"{dist} {importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            where = f"{dist} not installed: reported as skipped"
        print(f"  {name:<16} {what} ({suite}); {where}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.split("\n")[2:9]),
    )
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run benchmark suites and record their results")
    modes = r.add_mutually_exclusive_group()
    for m, what in (
        ("smoke", "tiny sizes: checks the pipeline end to end (CI); not a result"),
        ("quick", "a few minutes on a 2-core CPU (the default; the README's main job)"),
        ("full", "the sizes of the recorded results; an hour or more on 2 CPU cores"),
    ):
        modes.add_argument(f"--{m}", dest="mode", action="store_const", const=m, help=what)
    r.set_defaults(mode="quick")
    r.add_argument(
        "--suite",
        action="append",
        default=[],
        metavar="NAME",
        help=f"a suite to run (repeatable; default all): {', '.join(SUITES)}",
    )
    r.add_argument(
        "--baselines",
        default="all",
        metavar="A,B",
        help=f"baselines to measure: {', '.join(BASELINES)}, 'all' (default) or 'none'",
    )
    r.add_argument("--out", type=Path, default=DEFAULT_OUT, help="record directory")
    r.add_argument("--timeout-s", type=float, default=None, help="per suite (default by mode)")
    r.add_argument("--quiet", action="store_true", help="only a line per suite")
    r.add_argument(
        "--report",
        action="store_true",
        help="then write the report from the records (as `python -m benchmarks report`)",
    )
    rep = sub.add_parser("report", help="write RESULTS.md, plots and README from the records")
    from benchmarks import report

    report.add_arguments(rep)
    sub.add_parser("list", help="the suites and baselines, and which are installed")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv
    try:
        if args.command == "run":
            return run(args)
        if args.command == "report":
            from benchmarks import report

            return report.main_from_args(args)
        return list_things()
    except UsageError as e:
        print(f"python -m benchmarks {args.command}: error: {e}", file=sys.stderr)
        return 2
    except (RuntimeError, subprocess.TimeoutExpired) as e:  # jax would not start
        print(f"python -m benchmarks {args.command}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
