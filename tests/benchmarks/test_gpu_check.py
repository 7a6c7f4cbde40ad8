"""benchmarks/gpu_check.sh's plumbing, through its dry run on a CPU: every phase gets a status in
summary.json, also one stopped at its timeout or by a signal, and everything ends in one archive."""

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]
SCRIPT = _REPO / "benchmarks" / "gpu_check.sh"
PHASES = [
    "environment", "smoke", "cpu_lowering", "scaling", "fusion", "minatar", "gpu_tests",
    "fusion_sizes", "ppo", "throughput",
]  # fmt: skip
FINAL = {"ok", "failed", "timed_out", "skipped"}

pytestmark = pytest.mark.slow


def _env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """This environment without the check's settings, plus `settings`; temporaries in tmp/."""
    drop = ("OUT", "JAX_COMPILATION_CACHE_DIR")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_CHECK_") and k not in drop}
    (tmp_path / "tmp").mkdir()
    return env | {"PYTHON": sys.executable, "TMPDIR": str(tmp_path / "tmp"), **settings}


def _archive(out: Path) -> dict[str, bytes]:
    with tarfile.open(out / "gpu_check.tar.gz") as tar:
        return {
            m.name.removeprefix("./"): tar.extractfile(m).read()
            for m in tar.getmembers()
            if m.isfile()
        }


def _processes_naming(text: str) -> list[str]:
    """Command lines of running processes that contain `text` (Linux)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            line = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in line:
            found.append(line)
    return found


def test_a_dry_run_with_a_forced_timeout_reports_every_phase_and_archives_it(tmp_path):
    out = tmp_path / "out"
    # A budget that the environment, the forced smoke and at most one more phase spend.
    budget, kill_after = 16, 1
    env = _env(
        tmp_path, GPU_CHECK_BUDGET_S=str(budget), GPU_CHECK_MIN_PHASE_S="6",
        GPU_CHECK_KILL_AFTER_S=str(kill_after), GPU_CHECK_FORCE_TIMEOUT="smoke",
    )  # fmt: skip
    start = time.monotonic()
    proc = subprocess.run(
        ["bash", str(SCRIPT), "--dry-run", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    wall = time.monotonic() - start
    log = proc.stdout[-4000:] + proc.stderr[-4000:]
    assert proc.returncode == 1, log  # not every phase is ok

    summary = json.loads((out / "summary.json").read_text())
    assert summary["mode"] == "dry_run" and summary["status"] == "failed"
    assert summary["budget_s"] == budget
    assert [p["phase"] for p in summary["phases"]] == PHASES
    assert {p["status"] for p in summary["phases"]} <= FINAL, log
    phases = {p["phase"]: p for p in summary["phases"]}
    assert phases["environment"]["status"] == "ok", log
    # The forced phase ignores SIGINT: the timeout's SIGKILL ends it, and the script records it.
    smoke = phases["smoke"]
    assert (smoke["status"], smoke["timeout_s"], smoke["exit_code"]) == ("timed_out", 2, 137)
    assert 2 <= smoke["seconds"] < 2 + kill_after + 5
    skipped = [p for p in summary["phases"] if p["status"] == "skipped"]
    assert skipped and all(p["reason"].startswith("budget spent") for p in skipped)
    for p in summary["phases"]:
        if p["status"] != "skipped":
            assert p["seconds"] is not None and p["exit_code"] is not None and p["command"]
    assert wall < budget + 2 * kill_after + 20, wall

    assert sorted(os.listdir(out)) == ["gpu_check.tar.gz", "summary.json"]
    files = _archive(out)
    assert json.loads(files["summary.json"]) == summary
    assert {"environment.json", "environment.log", "smoke.log"} <= set(files)
    if phases["cpu_lowering"]["status"] != "skipped":  # pytest's JSON, even if it was killed
        tests = json.loads(files["cpu_lowering.json"])
        assert tests["status"] in ("incomplete", "interrupted", "ran") and "tests" in tests
    environment = json.loads(files["environment.json"])
    assert environment["backend"] == "cpu"
    assert not any(environment["extras_importable"].values())  # hidden, as on the GPU machine
    assert not list((tmp_path / "tmp").iterdir())  # the work folder went with the run


def test_a_check_stopped_by_a_signal_marks_the_running_phase_killed(tmp_path):
    out = tmp_path / "out"
    env = _env(tmp_path, GPU_CHECK_PHASES="environment,smoke", GPU_CHECK_KILL_AFTER_S="1")
    proc = subprocess.Popen(
        ["bash", str(SCRIPT), "--dry-run", str(out)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                phases = json.loads((out / "summary.json").read_text())["phases"]
            except (OSError, json.JSONDecodeError):
                phases = None
            if phases and phases[1]["status"] == "running":
                break
            time.sleep(0.2)
        else:
            pytest.fail("the smoke phase never started")
        time.sleep(1)  # inside the phase's Python
        proc.send_signal(signal.SIGTERM)
        log, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 1, log[-4000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert [p["status"] for p in summary["phases"]] == ["ok", "killed"]
    assert "SIGTERM" in summary["phases"][1]["reason"] and summary["phases"][1]["seconds"] >= 1
    assert json.loads(_archive(out)["summary.json"]) == summary
    assert not _processes_naming(str(tmp_path / "tmp"))  # the phase's processes are gone
    assert not list((tmp_path / "tmp").iterdir())
