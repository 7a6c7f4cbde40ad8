"""A record's command is relative to the repository and names no machine's paths: the peers'
venvs, temporary folders and --out folders are shown by what they are, not where they were."""

import json
import re
import sys
import tempfile
from pathlib import Path

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from benchmarks.harness.commands import portable_command  # noqa: E402
from benchmarks.harness.paths import REPO_ROOT  # noqa: E402
from benchmarks.harness.runner import SuiteProgress, run_suite  # noqa: E402
from benchmarks.harness.suite import Plan, Suite  # noqa: E402


def _absolute_paths(command: str) -> list[str]:
    return [part for part in command.replace("=", " ").split() if part.startswith("/")]


def test_commands_are_relative_to_the_repository_and_name_no_machine_path(monkeypatch):
    monkeypatch.setenv("PEER_ENVS", "/work/peer_envs")
    monkeypatch.setenv("HOME", "/home/someone")
    tmp = tempfile.gettempdir()
    argv = [
        sys.executable,
        str(REPO_ROOT / "benchmarks" / "peers" / "peer_brax.py"),
        "--out",
        str(REPO_ROOT / "runs" / "bench" / "r1" / "peers_cpu2_h.json"),
        f"--compilation-cache={tmp}/jaxsim-xla-1/xla",
        "/work/peer_envs/brax/bin/python",
        "/home/someone/runs/a b.json",
        "/mnt/data/elsewhere/x.json",
        "plain",
    ]
    command = portable_command(argv)
    assert command == (
        "python benchmarks/peers/peer_brax.py --out runs/bench/r1/peers_cpu2_h.json "
        "--compilation-cache=$TMPDIR/jaxsim-xla-1/xla $PEER_ENVS/brax/bin/python "
        "'~/runs/a b.json' .../x.json plain"
    )
    assert not _absolute_paths(command)


def test_a_run_logs_each_suites_command_without_its_out_folders_path(tmp_path, monkeypatch):
    # The front door's --out, outside the repository, as the suite's command gets it.
    def args(plan):
        return ["--quick"]

    suite = Suite(
        name="echo",
        module="json.tool",  # a module that exists: it fails on the arguments, quickly
        title="t",
        heading="h",
        problems=lambda d: [],
        section=lambda *a: "",
        args=args,
    )
    out = tmp_path / "run" / "echo_cpu2_h.json"
    out.parent.mkdir()
    entry = run_suite(suite, Plan("quick", frozenset(), False), out, 60, SuiteProgress(1, True), 1)
    assert entry["command"] == "python -m json.tool --quick --out $TMPDIR/" + str(
        out.relative_to(tempfile.gettempdir())
    )
    assert not _absolute_paths(entry["command"])


def test_a_records_provenance_command_names_no_machine_path(tmp_path, monkeypatch):
    from benchmarks.harness.provenance import command_line  # imports jax

    script = REPO_ROOT / "benchmarks" / "peers" / "measure.py"
    monkeypatch.setattr(sys, "argv", [str(script), "--out", str(tmp_path / "peers.json")])
    command = command_line()
    assert not _absolute_paths(command) and command.endswith("/peers.json"), command
    assert "$TMPDIR/" in command


def test_the_writer_makes_every_path_in_a_record_portable(tmp_path, monkeypatch):
    from benchmarks.harness.commands import portable_record
    from benchmarks.harness.record import append_jsonl, finish  # imports jax

    monkeypatch.setenv("PEER_ENVS", "/work/peer_envs")
    tmp = tempfile.gettempdir()
    record = {
        "benchmark": "x",
        "note": f"wrote {REPO_ROOT}/runs/bench/r1/x.json, then {tmp}/k.ttir:9:1: error",
        "cases": [{"skipped": "/work/peer_envs/brax/bin/python not found; see /usr/bin/time"}],
        "config": {"out": "/mnt/data/elsewhere/x.json", "scope": "jit(run)/while/body"},
        "url": "https://download.pytorch.org/whl/cpu",
    }
    expected = {
        "benchmark": "x",
        "note": "wrote runs/bench/r1/x.json, then $TMPDIR/k.ttir:9:1: error",
        "cases": [{"skipped": "$PEER_ENVS/brax/bin/python not found; see /usr/bin/time"}],
        "config": {"out": ".../x.json", "scope": "jit(run)/while/body"},
        "url": "https://download.pytorch.org/whl/cpu",
    }
    assert portable_record(record) == expected
    assert finish(record, tmp_path / "r.json", "") == 0
    assert json.loads((tmp_path / "r.json").read_text()) == expected
    append_jsonl(tmp_path / "runs.jsonl", record)
    assert json.loads((tmp_path / "runs.jsonl").read_text()) == expected


def test_the_published_records_and_results_md_name_no_machine_path():
    machine = re.compile(r"(?<![\w.)])/(?:work|tmp|home|root)/")
    published = REPO_ROOT / "benchmarks" / "results"
    files = [*published.rglob("*.json"), *published.rglob("*.jsonl")]
    files.append(REPO_ROOT / "benchmarks" / "RESULTS.md")
    found = [f"{p.name}: {m.group()}" for p in files for m in machine.finditer(p.read_text())]
    assert len(files) > 10 and found == []
