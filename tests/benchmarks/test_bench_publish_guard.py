"""Publishing never makes the published record worse without saying so, and a run's folder is
the run's: what `report --publish` refuses, what `--replace` keeps, and what nothing but
`--publish` may write."""

import json
import sys
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from test_benchmarks_report import _point, _prov  # noqa: E402

from benchmarks import __main__ as front  # noqa: E402
from benchmarks.harness import registry  # noqa: E402
from benchmarks.harness.paths import HISTORY, MANIFEST  # noqa: E402
from benchmarks.report import cli  # noqa: E402


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _with_load(load: float, utc: str) -> dict:
    return {**_prov(utc=utc), "loadavg_1_5_15min": [load, load, load]}


def _peers(cases: dict, load: float = 0.3, utc: str = "2026-12-02T00:22:50+00:00") -> dict:
    return {"benchmark": "peers", "provenance": _with_load(load, utc), "cases": cases}


def _measured(ratio: float) -> dict:
    return {"comparison": {"ratio": ratio, "target": ">= 2x", "target_met": ratio >= 2}}


def _skipped(peer: str) -> dict:
    return {"skipped": f"{peer}'s venv is absent; install with: setup_envs.sh {peer}"}


def _throughput(points: list, load: float, utc: str) -> dict:
    return {
        "benchmark": "rollout_throughput",
        "provenance": _with_load(load, utc),
        "config": {"repeats": 3, "min_time": 0.1, "quick": True},
        "checks": {},
        "targets": [],
        "results": points,
    }


def _run(root: Path, name: str, record: dict) -> Path:
    """A front-door run folder holding one record."""
    run = root / "run"
    run.mkdir(parents=True)
    assert registry.record_problems(record) == []
    (run / name).write_text(json.dumps(record))
    entry = {"run_id": "r1", "event": "run", "mode": "full", "status": "ok", "suite": None}
    (run / MANIFEST).write_text(json.dumps(entry) + "\n")
    return run


def _published(tmp_path: Path, name: str, record: dict) -> Path:
    published = tmp_path / "published"
    published.mkdir()
    (published / name).write_text(json.dumps(record))
    (published / MANIFEST).write_text('{"run_id": "r0", "event": "run"}\n')
    return published


def _publish(tmp_path, run, published, *extra) -> int:
    md, readme = tmp_path / "RESULTS.md", tmp_path / "README.md"
    argv = ["--publish", "--results", str(run), "--out", str(md), "--readme", str(readme)]
    return cli.main([*argv, "--no-plots", *extra], published=published)


PEERS = "peers_cpu2_h.json"
PUBLISHED_PEERS = {"brax_ppo_solve": _measured(3.24), "rejax_ppo": _measured(2.5)}


@pytest.fixture
def readme(tmp_path) -> Path:
    path = tmp_path / "README.md"
    path.write_text("# x\n\n## Latest results\n\nthe published figures\n")
    return path


def test_a_record_that_measured_nothing_is_not_published(tmp_path, readme, capsys):
    # `run --full --suite peers` without the peers' venvs: every case skipped, the run exits 0.
    published = _published(tmp_path, PEERS, _peers(PUBLISHED_PEERS))
    before = _snapshot(published)
    skipped = {"brax_ppo_solve": _skipped("brax"), "rejax_ppo": _skipped("rejax")}
    run = _run(tmp_path, PEERS, _peers(skipped, utc="2026-12-03T00:00:00+00:00"))
    assert _publish(tmp_path, run, published) == 2
    err = capsys.readouterr().err
    assert f"{run / PEERS}: measured nothing" in err and "nothing was copied" in err
    # Not even with --replace: a record with no measured case is not a result.
    assert _publish(tmp_path, run, published, "--replace") == 2
    assert _snapshot(published) == before and "the published figures" in readme.read_text()
    assert not (tmp_path / "RESULTS.md").exists()


def test_a_record_with_fewer_cases_is_refused_unless_replaced_and_then_kept_as_history(
    tmp_path, readme, capsys
):
    old = _peers(PUBLISHED_PEERS)
    published = _published(tmp_path, PEERS, old)
    before = _snapshot(published)
    fewer = {"brax_ppo_solve": _skipped("brax"), "rejax_ppo": _measured(2.6)}
    run = _run(tmp_path, PEERS, _peers(fewer, utc="2026-12-03T00:00:00+00:00"))
    assert _publish(tmp_path, run, published) == 2
    err = capsys.readouterr().err
    assert f"{PEERS} would be replaced by {PEERS}, which loses: 1 case(s): brax_ppo_solve" in err
    assert "pass --replace" in err and _snapshot(published) == before
    assert "the published figures" in readme.read_text()
    # --replace publishes it, and the old record is kept as history, named by its date and commit.
    assert _publish(tmp_path, run, published, "--replace") == 0
    assert json.loads((published / PEERS).read_text())["cases"] == fewer
    kept = published / HISTORY / "peers_cpu2_h_20261202T002250_abc123.json"
    assert json.loads(kept.read_text()) == old
    assert f"the old record kept as {kept}" in capsys.readouterr().out
    # The report passes over history: it shows the new record alone.
    assert "peers_cpu2_h_2026" not in (tmp_path / "RESULTS.md").read_text()


def test_a_quieter_run_with_every_baseline_replaces_the_published_one_without_asking(
    tmp_path, readme
):
    old = [_point("jaxsim", "CartPole-v1", 4096, 2e7), _point("envpool", "CartPole-v1", 4096, 1e6)]
    name = "rollout_throughput_cpu2_h_quick.json"
    published = _published(tmp_path, name, _throughput(old, 1.2, "2026-12-01T00:00:00+00:00"))
    more = [*old, _point("gymnax", "CartPole-v1", 4096, 5e6)]
    run = _run(tmp_path, name, _throughput(more, 1.0, "2026-12-03T00:00:00+00:00"))
    assert _publish(tmp_path, run, published) == 0
    assert not (published / HISTORY).exists()
    assert "gymnax" in json.dumps(json.loads((published / name).read_text()))


def test_a_loaded_quick_run_without_envpool_keeps_the_quiet_published_figures(
    tmp_path, readme, capsys
):
    # The published quick throughput record: EnvPool measured, on a quiet machine (load 1.2).
    name = "rollout_throughput_cpu2_h_quick.json"
    old = [_point("jaxsim", "CartPole-v1", 4096, 2e7), _point("envpool", "CartPole-v1", 4096, 1e6)]
    published = _published(tmp_path, name, _throughput(old, 1.2, "2026-12-01T00:00:00+00:00"))
    plain = ["--results", str(published), "--out", str(tmp_path / "R0.md"), "--no-plots"]
    assert cli.main([*plain, "--readme", str(readme)]) == 0
    headline = readme.read_text()
    assert "EnvPool" in headline
    before = _snapshot(published)
    # A quick run without EnvPool installed, on a loaded machine.
    new = [
        _point("jaxsim", "CartPole-v1", 4096, 1.2e7),
        _point("envpool", "CartPole-v1", 4096, None, status="skipped", reason="not installed"),
    ]
    run = _run(tmp_path, name, _throughput(new, 4.0, "2026-12-03T00:00:00+00:00"))
    assert _publish(tmp_path, run, published) == 2
    err = capsys.readouterr().err
    assert "loses: baseline(s) envpool" in err
    assert "a quieter machine: measured at load 4, the published one at 1.2" in err
    assert _snapshot(published) == before and readme.read_text() == headline


def test_a_newer_quick_record_does_not_silently_take_a_full_records_place(tmp_path, capsys):
    points = [_point("jaxsim", "CartPole-v1", 4096, 2e7)]
    full = _throughput(points, 1.0, "2026-12-01T00:00:00+00:00")
    full["config"]["quick"] = False
    published = _published(tmp_path, "rollout_throughput_cpu2_h.json", full)
    quick = _throughput(points, 1.0, "2026-12-03T00:00:00+00:00")
    run = _run(tmp_path, "rollout_throughput_cpu2_h_quick.json", quick)
    assert _publish(tmp_path, run, published) == 2
    err = capsys.readouterr().err
    assert "loses: mode full (a quick record would be shown in its place)" in err
    # With --replace it is published; the full record, not overwritten, stays where it was.
    assert _publish(tmp_path, run, published, "--replace") == 0
    assert (published / "rollout_throughput_cpu2_h.json").exists()
    assert "no longer shown" in capsys.readouterr().out


def test_a_mode_never_rewrites_the_tracked_reports(tmp_path, monkeypatch, capsys):
    # Stand-ins for benchmarks/RESULTS.md and README.md: the real ones are never at risk here.
    md, readme = tmp_path / "RESULTS.md", tmp_path / "README.md"
    md.write_text("625 lines")
    readme.write_text("# x\n\n## Latest results\n\nthe published figures\n")
    monkeypatch.setattr(cli, "RESULTS_MD", md)
    monkeypatch.setattr(cli, "README", readme)
    points = [_point("jaxsim", "CartPole-v1", 4096, 2e7)]
    published = _published(tmp_path, "x.json", _throughput(points, 1.0, "2026-12-01T00:00:00Z"))
    before = _snapshot(tmp_path)
    for mode in ("smoke", "full"):
        assert cli.main(["--publish", "--mode", mode], published=published) == 2
        assert f"--mode {mode} with --publish would rewrite" in capsys.readouterr().err
    # Nor does a plain report of one mode write where --publish does.
    assert cli.main(["--results", str(published), "--mode", "quick", "--out", str(md)]) == 2
    assert cli.main(["--results", str(published), "--readme", str(readme)]) == 2
    assert cli.main(["--results", str(tmp_path), "--out", str(published / "R.md")], published) == 2
    assert "only --publish writes there" in capsys.readouterr().err
    assert _snapshot(tmp_path) == before


def test_a_run_never_writes_into_the_published_folder(tmp_path, monkeypatch, capsys):
    published = tmp_path / "published"
    published.mkdir()
    monkeypatch.setattr(front, "RESULTS_DIR", published)
    ran = []
    monkeypatch.setattr(front, "probe_machine", lambda: ran.append(1))
    for out in (published, published / "sub"):
        assert front.main(["run", "--smoke", "--suite", "peers", "--out", str(out)]) == 2
        assert "inside the published records' folder" in capsys.readouterr().err
    assert not ran and not list(published.iterdir())


@pytest.mark.parametrize("value", ["-5", "0", "nan", "inf"])
def test_a_non_positive_timeout_is_refused_naming_the_flag(value, monkeypatch, capsys):
    monkeypatch.setattr(front, "probe_machine", lambda: pytest.fail("ran"))
    with pytest.raises(SystemExit) as refused:
        front.main(["run", "--smoke", f"--timeout-s={value}"])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert "argument --timeout-s: expected a finite number of seconds > 0" in err
