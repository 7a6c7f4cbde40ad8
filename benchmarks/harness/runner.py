"""Running one suite as its own process: the machine probe, timeouts, process groups, records
checked on arrival, and the run's manifest (`runs.jsonl`). `python -m benchmarks` drives it."""

from __future__ import annotations

import collections
import datetime
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.commands import portable_command
from benchmarks.harness.formatting import format_duration
from benchmarks.harness.paths import MANIFEST, REPO_ROOT, child_env
from benchmarks.harness.record import append_jsonl
from benchmarks.harness.registry import suite_available
from benchmarks.harness.suite import Plan, Suite


def utc() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def probe_machine(timeout: float = 300) -> dict[str, Any]:
    """Machine tag and provenance, from a child process.

    Initialising jax here would hold the accelerator (and, on a GPU, most of its memory) while
    the suites run, so a short-lived child answers instead.
    """
    code = (
        "import json; from benchmarks.harness.provenance import machine_tag, provenance; "
        "print(json.dumps({'machine_tag': machine_tag(), 'provenance': provenance()}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(),
    )
    if out.returncode != 0:
        raise RuntimeError(f"could not start jax in a child process:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


class SuiteProgress:
    """Prints suite headers, each child's output under its suite with the elapsed time, and
    a line per finished suite; `quiet` keeps only the suite lines."""

    def __init__(self, total: int, quiet: bool, stream=None):
        self.total, self.quiet = total, quiet
        self.stream = stream or sys.stdout
        self.started = time.perf_counter()

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def start(self, i: int, suite: Suite, command: str) -> None:
        elapsed = format_duration(time.perf_counter() - self.started)
        self._print(f"[{i}/{self.total}] {suite.name}: {suite.title}  (total {elapsed})")
        if not self.quiet:
            self._print(f"    $ {command}")

    def line(self, suite: Suite, suite_started: float, text: str) -> None:
        if not self.quiet:
            elapsed = format_duration(time.perf_counter() - suite_started)
            self._print(f"    {suite.name} {elapsed} | {text.rstrip()}")

    def done(self, i: int, entry: dict[str, Any]) -> None:
        status = entry["status"].upper() if entry["status"] != "ok" else "ok"
        what = f" -> {entry['record']}" if entry.get("record") else ""
        why = f": {entry['reason']}" if entry.get("reason") else ""
        wall = f" in {entry['wall_s']:.1f} s" if entry.get("wall_s") is not None else ""
        self._print(f"[{i}/{self.total}] {entry['suite']}: {status}{wall}{what}{why}")


def record_path(out_dir: Path, suite: Suite, tag: str, mode: str) -> Path:
    suffix = "" if mode == "full" else f"_{mode}"
    return out_dir / f"{suite.benchmark}_{tag}{suffix}.json"


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
    suite: Suite, plan: Plan, out: Path, timeout_s: float, progress: SuiteProgress, i: int
) -> dict[str, Any]:
    """Runs one suite as a child process; returns its manifest entry (never raises for the
    suite's own failures; KeyboardInterrupt stops the child and propagates)."""
    entry: dict[str, Any] = {"suite": suite.name, "module": suite.module, "started_utc": utc()}
    missing = suite_available(suite)
    if missing is not None:
        progress.start(i, suite, "(not run)")
        return {**entry, "status": "skipped", "reason": missing, "record": None}
    cmd = [sys.executable, "-m", suite.module, *suite.args(plan), "--out", str(out)]
    shown = portable_command(["python", "-m", suite.module, *cmd[3:]])
    entry["command"] = shown
    progress.start(i, suite, shown)
    tail: collections.deque[str] = collections.deque(maxlen=25)
    before = _mtime(out)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=REPO_ROOT,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        start_new_session=True,  # its own process group: a timeout stops its helpers too
    )
    timed_out = threading.Event()

    def on_timeout():
        timed_out.set()
        stop_process_group(proc)

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
        stop_process_group(proc)
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


def raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def stop_process_group(proc: subprocess.Popen) -> None:
    """SIGINT to the process group of `proc` (started with `start_new_session`), so it can
    clean up, then SIGKILL."""
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
    append_jsonl(out_dir / MANIFEST, entry)
