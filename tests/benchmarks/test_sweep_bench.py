"""The sweep benchmark writes under runs/bench/ unless told otherwise, and its rejax comparison
refuses to start, naming the command that makes rejax's venv, where that venv is absent."""

from benchmarks.harness.paths import RUNS_DIR
from benchmarks.micro import sweep_bench


def test_beside_rejax_without_its_venv_is_refused_before_any_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PEER_ENVS", str(tmp_path / "no_peer_envs"))
    assert sweep_bench.main(["--beside-rejax", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "--beside-rejax" in err and "benchmarks/peers/setup_envs.sh rejax" in err
    assert not list((tmp_path / "out").iterdir())  # nothing measured, nothing written


def test_records_go_under_runs_not_the_published_folder(monkeypatch, tmp_path):
    assert RUNS_DIR.parts[-2:] == ("runs", "bench")
    runs = tmp_path / "runs" / "bench"
    monkeypatch.setattr(sweep_bench, "RUNS_DIR", runs)  # the default, read when main parses
    seen = {}
    monkeypatch.setattr(sweep_bench, "beside_rejax", lambda out, seeds: seen.setdefault("out", out))
    sweep_bench.main(["--beside-rejax"])
    assert seen["out"] == runs and runs.is_dir()
