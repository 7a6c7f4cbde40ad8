"""Measuring is not publishing: a benchmark run leaves the checkout clean; `report --publish`
is the one act that changes the committed records, RESULTS.md and the README's section."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from test_benchmarks import PROVENANCE_FIELDS  # noqa: E402
from test_benchmarks_report import _point, _prov  # noqa: E402

from benchmarks import __main__ as front  # noqa: E402
from benchmarks.harness import registry  # noqa: E402
from benchmarks.harness.optional import install_hint  # noqa: E402
from benchmarks.harness.record import read_jsonl  # noqa: E402
from benchmarks.report import cli  # noqa: E402
from benchmarks.rollout_throughput import measure as rt  # noqa: E402


def _clone(tmp_path) -> Path:
    """A git clone of this checkout's HEAD, or a skip saying why there is none."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    head = subprocess.run(["git", "-C", str(_REPO), "rev-parse", "HEAD"], capture_output=True)
    if head.returncode != 0:
        pytest.skip(f"{_REPO} is not a git checkout")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(_REPO), str(clone)], check=True, timeout=120)
    return clone


@pytest.mark.slow
def test_smoke_run_in_a_clone_writes_under_runs_and_changes_no_tracked_file(tmp_path):
    """`python -m benchmarks run --smoke` in a fresh clone: every suite at tiny sizes, valid
    records, the report and plots under runs/bench/<run>/, a summary printed, `git status`
    clean."""
    clone = _clone(tmp_path)
    # The clone's code, this interpreter; the peers' own venvs absent, as on a fresh machine.
    env = dict(os.environ, PYTHONPATH=str(clone), PEER_ENVS=str(tmp_path / "no_peer_envs"))
    cmd = [sys.executable, "-m", "benchmarks", "run", "--smoke"]
    proc = subprocess.run(cmd, cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True
    )
    assert status.stdout == "", status.stdout  # nothing tracked changed, nothing new unignored
    assert "[5/10] breakdown: ok" in proc.stdout  # the progress display
    (out,) = (clone / "runs" / "bench").iterdir()
    assert f"report: {out / 'RESULTS.md'}" in proc.stdout
    assert "| jaxsim (scan)" in proc.stdout  # the summary table
    entries = read_jsonl(out / front.MANIFEST)
    by_suite = {e["suite"]: e for e in entries if e.get("event") != "run"}
    assert {k: v["status"] for k, v in by_suite.items()} == {
        "throughput": "ok",
        "fusion": "ok",
        "sizes": "ok",
        "ppo": "ok",
        "offpolicy": "ok",
        "breakdown": "ok",
        "scaling": "ok",
        "adapters": "ok",
        "minatar": "ok",
        "peers": "ok",
    }
    for name in registry.runnable():
        record = json.loads((out / by_suite[name]["record"]).read_text())
        assert PROVENANCE_FIELDS <= set(record["provenance"]), name
        module = registry.SUITES[name].module
        assert record["provenance"]["command"].startswith(f"python -m {module}")
    rt_record = json.loads((out / by_suite["throughput"]["record"]).read_text())
    assert rt_record["env_ids"] == ["CartPole-v1", "Pendulum-v1"]
    ok = [r for r in rt_record["results"] if r["status"] == "ok"]
    assert {r["impl"] for r in ok} >= {"jaxsim", "physics_only"}
    cartpole = {r["impl"]: r for r in rt_record["results"] if r["env_id"] == "CartPole-v1"}
    assert set(cartpole) == set(rt.IMPLS)  # every baseline: measured, or skipped with a reason
    for r in cartpole.values():  # and a skipped one says how to install it
        assert r["status"] == "ok" or "install with: pip install" in r["reason"], r
    assert all(r["steps_per_s"]["median"] > 0 and len(r["timing"]["samples_s"]) == 3 for r in ok)
    text = (out / "RESULTS.md").read_text()
    for heading in (
        "## Published figures",
        "## Rollout throughput",
        "## Scan vs fused",
        "## Fusion vs simulator size",
        "## Learning: time to solve",
        "## Profiler breakdown",
        "## Many devices: the batch split over a mesh",
        "## Front-door runs",
    ):
        assert heading in text, heading
    assert list(out.glob("report_*.png"))  # the plots, beside the report
    # A smoke run is refused by --publish, before any file is copied.
    published = tmp_path / "published"
    published.mkdir()
    argv = ["--publish", "--results", str(out), "--out", str(tmp_path / "R.md"), "--no-readme"]
    assert cli.main(argv, published=published) == 2
    assert not list(published.iterdir())


def _record(median: float = 2e7) -> dict:
    return {
        "benchmark": "rollout_throughput",
        "provenance": _prov(),
        "config": {"repeats": 3, "min_time": 0.1, "quick": True},
        "checks": {},
        "targets": [],
        "results": [_point("jaxsim", "CartPole-v1", 4096, median)],
    }


def _quick_run(root: Path, median: float, run_id: str) -> Path:
    run = root / run_id
    run.mkdir(parents=True)
    record = _record(median)
    (run / "rollout_throughput_cpu2_h_quick.json").write_text(json.dumps(record))
    (run / "RESULTS.md").write_text("a run's own report: never published")
    entry = {"run_id": run_id, "event": "run", "mode": "quick", "status": "ok", "suite": None}
    (run / front.MANIFEST).write_text(json.dumps(entry) + "\n")
    return run


def test_report_publishes_only_when_asked(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    first = _quick_run(runs, 2e7, "r1")
    second = _quick_run(runs, 3e7, "r2")
    monkeypatch.setattr(cli, "RUNS_DIR", runs)
    os.utime(first / front.MANIFEST, (1, 1))  # r2 is the newest run
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n## Latest results\n\nold\n")
    # Without --publish: the newest run's report beside its records; no README, nothing copied.
    published = tmp_path / "published"
    published.mkdir()
    assert cli.main([], published=published) == 0
    assert "30M" in (second / "RESULTS.md").read_text()
    assert not list(published.iterdir()) and "old" in readme.read_text()
    # --publish: the run's records and run log copied, then the published report and README.
    (published / front.MANIFEST).write_text('{"run_id": "r0", "event": "run"}\n')
    md = tmp_path / "RESULTS.md"
    argv = ["--publish", "--results", str(first), "--out", str(md), "--readme", str(readme)]
    assert cli.main(argv, published=published) == 0
    assert sorted(p.name for p in published.iterdir()) == [
        "report_rollout_throughput_cpu2_h_quick.png",
        "rollout_throughput_cpu2_h_quick.json",
        "runs.jsonl",
    ]
    log = read_jsonl(published / front.MANIFEST)
    assert [e["run_id"] for e in log] == ["r0", "r1"]
    # Publishing the same run again re-renders it but logs its lines once.
    assert cli.main(argv, published=published) == 0
    assert read_jsonl(published / front.MANIFEST) == log
    assert "20M" in md.read_text() and "20M" in readme.read_text()
    assert "old" not in readme.read_text()
    assert "](published/report_rollout_throughput_cpu2_h_quick.png)" in md.read_text()


def test_a_missing_baseline_names_the_command_that_installs_it():
    assert "torch==2.13.0" in install_hint("torch") and ".[baselines]" in install_hint("torch")
    assert "download.pytorch.org/whl/cpu" in install_hint("envpool")  # the CPU build first
    assert install_hint("gymnax") == 'install with: pip install -e ".[bench]"'
    assert install_hint("not_a_baseline") == ""


# ------------------------------------------------ publishing: checked first, nothing foreign
def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_publish_refuses_a_run_with_an_invalid_record_and_copies_nothing(tmp_path, capsys):
    name = "rollout_throughput_cpu2_h_quick.json"
    published = tmp_path / "published"
    published.mkdir()
    (published / name).write_text(json.dumps(_record()))
    (published / front.MANIFEST).write_text('{"run_id": "r0", "event": "run"}\n')
    before = _snapshot(published)
    run = tmp_path / "run"
    run.mkdir()
    (run / name).write_text(json.dumps(_record(3e7))[:200])  # truncated by a kill
    (run / "fusion_cpu2_h_quick.json").write_text(json.dumps({"benchmark": "fusion"}))
    (run / front.MANIFEST).write_text('{"run_id": "r1", "event": "run"}\n')
    md = tmp_path / "RESULTS.md"
    argv = ["--publish", "--results", str(run), "--out", str(md), "--no-readme", "--no-plots"]
    assert cli.main(argv, published=published) == 2
    err = capsys.readouterr().err
    assert "nothing was copied" in err and f"{run / name}: not valid JSON" in err
    assert "fusion_cpu2_h_quick.json: lacks field 'provenance'" in err
    assert _snapshot(published) == before and not md.exists()


def test_publish_without_a_run_log_copies_records_not_foreign_files(tmp_path, capsys):
    # A benchmarks/gpu_check.sh OUT_DIR: records, their plots, the check's summaries, logs, and
    # a record of no suite the report reads.
    out = tmp_path / "gpu_h200"
    out.mkdir()
    # A `--check-only` fusion record: its kernels' checks, no timed point.
    checks = {"CartPole-v1/random/rewards/K=4": {"pass": True}}
    (out / "fusion.json").write_text(
        json.dumps({"benchmark": "fusion", "provenance": _prov(), "results": [], "checks": checks})
    )
    (out / "rollout_throughput_cpu2_h_quick.json").write_text(json.dumps(_record()))
    (out / "rollout_throughput_cpu2_h_quick_curve.png").write_bytes(b"png")
    (out / "gpu_tests.json").write_text('{"status": "passed", "counts": {"passed": 3}}')
    (out / "environment.json").write_text('{"devices": ["NVIDIA H200"], "jax": "0.11.2"}')
    (out / "fusion.log").write_text("a log")
    (out / "other.json").write_text(json.dumps({"benchmark": "not_a_suite", "x": 1}))
    published = tmp_path / "published"
    published.mkdir()
    md = tmp_path / "RESULTS.md"
    argv = ["--publish", "--results", str(out), "--out", str(md), "--no-readme", "--no-plots"]
    assert cli.main(argv, published=published) == 0
    assert sorted(_snapshot(published / "gpu_h200")) == [
        "environment.json",
        "fusion.json",
        "gpu_tests.json",
        "rollout_throughput_cpu2_h_quick.json",
        "rollout_throughput_cpu2_h_quick_curve.png",
    ]
    printed = capsys.readouterr().out
    assert f"not published: {out / 'fusion.log'}: not a record" in printed
    assert f"not published: {out / 'other.json'}: a 'not_a_suite' record" in printed


def test_the_plain_report_names_every_file_it_ignores(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    (results / "rollout_throughput_cpu2_h_quick.json").write_text(json.dumps(_record()))
    (results / "compact_reset_cpu2_h.json").write_text(json.dumps({"benchmark": "compact_reset"}))
    (results / "notes.txt").write_text("hand-written")
    (results / "list.json").write_text("[1, 2]")
    (results / "fusion_cpu2_h.partial.jsonl").write_text("{}\n")
    argv = ["--results", str(results), "--out", str(tmp_path / "R.md"), "--no-plots"]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    ignored = {line.split(": ", 2)[1].removeprefix("ignored ") for line in err.splitlines()}
    assert ignored == {
        str(results / name)
        for name in (
            "compact_reset_cpu2_h.json",
            "notes.txt",
            "list.json",
            "fusion_cpu2_h.partial.jsonl",
        )
    }
