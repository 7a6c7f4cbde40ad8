"""The front door runs every suite of the registry as its own process, keeps what finished, and
takes a new suite from one folder and one registry line."""

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

# benchmarks/ is a top-level folder of the repository, not part of the installed package.
_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from benchmarks import __main__ as front  # noqa: E402
from benchmarks.harness import registry  # noqa: E402
from benchmarks.harness.record import read_jsonl  # noqa: E402
from benchmarks.harness.suite import Plan, Suite  # noqa: E402
from benchmarks.report import cli as results_report  # noqa: E402


def test_front_door_rejects_bad_input_before_running(tmp_path, capsys, monkeypatch):
    ran = []
    monkeypatch.setattr(front, "probe_machine", lambda: ran.append(1))
    assert front.main(["run", "--suite", "throughput", "--suite", "nope", "--out", str(tmp_path)])
    assert "unknown suite(s) 'nope'" in capsys.readouterr().err
    assert front.main(["run", "--baselines", "gymnax,bogus", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown baseline(s) 'bogus'" in err and "envpool" in err  # lists the valid ones
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert front.main(["run", "--smoke", "--out", str(blocker / "sub")]) == 2
    assert "cannot write to output directory" in capsys.readouterr().err
    assert not ran and not (tmp_path / front.MANIFEST).exists()
    with pytest.raises(SystemExit):
        front.main(["run", "--quick", "--full"])  # one mode only
    assert results_report.main(["--results", str(tmp_path / "missing"), "--no-readme"]) == 2


def test_front_door_sizes_each_suite_per_mode_and_baselines():
    def args(name, mode, baselines=registry.BASELINES, gpu=False):
        return registry.SUITES[name].args(Plan(mode, frozenset(baselines), gpu))

    quick = args("throughput", "quick")
    # Quick (the main job's few minutes): fewer environments and cases than full, which runs
    # them all.
    assert quick[:3] == ["--quick", "--envs", "CartPole-v1,Pendulum-v1"]
    assert "envpool" in quick[quick.index("--impls") + 1]
    assert args("throughput", "full")[:2] == ["--envs", "all"]
    assert args("adapters", "quick")[:2] == ["--families", "brax,gymnasium"]
    assert args("adapters", "quick")[-4:] == [
        "--brax-env",
        "inverted_pendulum",
        "--num-envs",
        "256",
    ]
    assert args("adapters", "full")[:2] == ["--families", "brax,gymnax,gymnasium"]
    assert "--num-envs" not in args("adapters", "full")
    assert "1,4096" in args("throughput", "quick") and "--num-envs" not in args(
        "throughput", "full"
    )
    assert args("breakdown", "quick")[1] == "ppo_scan,gym_sync"
    assert "ppo_fused" in args("breakdown", "quick", gpu=True)[1]
    assert "ppo_fused" in args("breakdown", "full")[1]
    assert args("offpolicy", "quick") == ["--quick", "--envs", "CartPole-v1"]
    assert args("offpolicy", "full") == []
    assert args("throughput", "quick", ["gymnax"])[4] == (
        "jaxsim,jaxsim_reuse,jaxsim_rewards,gymnax,physics_only"
    )
    assert "1048576" in args("throughput", "full", gpu=True)[-3]
    assert "--no-sb3" in args("ppo", "quick", ["gymnax"]) and "--no-sb3" not in args("ppo", "full")
    assert "gym_sync" not in args("breakdown", "quick", [])[1]
    assert args("fusion", "quick", gpu=True) == ["--quick"]  # the GPU's own quick grid
    for name in ("throughput", "fusion", "ppo", "breakdown"):
        for mode in registry.MODES:
            assert "--out" not in args(name, mode)  # the front door chooses the record's path


_FAKE_SUITE = """
import argparse, json, sys, time
p = argparse.ArgumentParser()
p.add_argument("--behave")
p.add_argument("--out")
a = p.parse_args()
print("fake suite working", flush=True)
if a.behave == "hang":
    try:
        time.sleep(120)
    except KeyboardInterrupt:
        print("hang: cleaned up", flush=True)
        raise
if a.behave == "crash":
    sys.exit(3)
json.dump({"benchmark": "fusion", "provenance": {"command": "fake"}, "results": []},
          open(a.out, "w"))
"""
_MACHINE = {
    "machine_tag": "cpu2_test",
    "provenance": {
        "jax_backend": "cpu",
        "device_kind": "cpu",
        "cpu_model": "test",
        "cpu_count": 2,
        "loadavg_1_5_15min": None,
        "versions": {"jax": "x"},
        "commit": "unknown",
    },
}


def _suite(name: str, module: str, args, **kw) -> Suite:
    return Suite(name, module, name, f"## {name}", lambda d: [], lambda r, b, p: "", args, **kw)


def test_front_door_keeps_finished_records_when_a_suite_fails_or_hangs(tmp_path, monkeypatch):
    (tmp_path / "mods").mkdir()
    for name in ("ok", "crash", "hang"):
        (tmp_path / "mods" / f"fake_{name}.py").write_text(_FAKE_SUITE)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "mods"))
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    monkeypatch.setattr(front, "probe_machine", lambda: _MACHINE)
    suites = {
        name: _suite(name, f"fake_{name}", lambda p, b=name: ["--behave", b])
        for name in ("ok", "crash", "hang")
    }
    suites["gone"] = _suite(
        "gone", "benchmarks.not_there", lambda p: [], missing_reason="not written yet"
    )
    monkeypatch.setattr(registry, "SUITES", suites)
    out = tmp_path / "results"
    argv = ["run", "--smoke", "--quiet", "--timeout-s", "3", "--out", str(out)]
    for name in ("ok", "crash", "gone", "hang"):
        argv += ["--suite", name]
    # As started in the background (`cmd &`): SIGINT ignored, yet the timed-out suite gets it.
    ignoring = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert front.main(argv) == 1  # some failed, and the run carried on past them
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # as it was
    finally:
        signal.signal(signal.SIGINT, ignoring)
    entries = read_jsonl(out / front.MANIFEST)
    by_suite = {e["suite"]: e for e in entries if e.get("event") != "run"}
    assert (
        by_suite["ok"]["status"] == "ok"
        and by_suite["ok"]["record"] == "fake_ok_cpu2_test_smoke.json"
    )
    assert json.loads((out / "fake_ok_cpu2_test_smoke.json").read_text())["benchmark"] == "fusion"
    assert (
        by_suite["crash"]["status"] == "failed" and "exit status 3" in by_suite["crash"]["reason"]
    )
    assert (
        by_suite["gone"]["status"] == "skipped" and "not written yet" in by_suite["gone"]["reason"]
    )
    assert by_suite["hang"]["status"] == "failed" and "timed out" in by_suite["hang"]["reason"]
    assert by_suite["hang"]["wall_s"] < 9  # its 3 s, not SIGKILL's 10 s later
    assert "hang: cleaned up" in by_suite["hang"]["output_tail"]
    summary = entries[-1]
    assert summary["event"] == "run" and summary["suites"]["ok"] == "ok"
    # Append-only: a second run adds lines and leaves the first run's intact.
    assert front.main([*argv[:-6], "--suite", "ok"]) == 0
    assert read_jsonl(out / front.MANIFEST)[: len(entries)] == entries


# ---------------------------------------------------------- a new suite: one folder, one line
_TOY = {
    "__init__.py": '"""A toy suite: counts to N."""\n',
    "suite.py": '''"""The toy suite: its arguments per mode, record schema and report section."""

from benchmarks.report import schema as s
from benchmarks.report.markdown import provenance_block
from benchmarks.harness.suite import Suite


def section(r, base, plot=None):
    return f"### Counted to {r.data['count']}: {r.device}\\n\\n{provenance_block(r, base)}"


SUITE = Suite(
    name="toy",
    module="toy_suite",
    title="counts to N",
    heading="## Toy counting",
    problems=lambda data: s.check(data, "", (("count", s.positive),)),
    section=section,
    args=lambda plan: ["--count", "3" if plan.mode == "smoke" else "30"],
)
''',
    "__main__.py": '''"""`python -m toy_suite --count N --out RECORD`."""

import argparse

from benchmarks.harness.provenance import provenance
from benchmarks.harness.record import finish

p = argparse.ArgumentParser()
p.add_argument("--count", type=int)
p.add_argument("--out")
a = p.parse_args()
record = {"benchmark": "toy_suite", "provenance": provenance(), "count": a.count}
raise SystemExit(finish(record, a.out, f"counted to {a.count}"))
''',
}


def test_a_suite_is_one_folder_and_one_registry_line(tmp_path, monkeypatch):
    for name, text in _TOY.items():
        (tmp_path / "toy_suite").mkdir(exist_ok=True)
        (tmp_path / "toy_suite" / name).write_text(text)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path))
    # The one line: the package added to the registry.
    monkeypatch.setattr(registry, "SUITES", registry.load((*registry.PACKAGES, "toy_suite")))
    monkeypatch.setattr(front, "probe_machine", lambda: _MACHINE)
    out = tmp_path / "run"
    assert front.main(["run", "--smoke", "--quiet", "--suite", "toy", "--out", str(out)]) == 0
    record = json.loads((out / "toy_suite_cpu2_test_smoke.json").read_text())
    assert record["count"] == 3 and record["provenance"]["command"].startswith("python -m toy")
    # The report reads it through the toy's schema and shows the toy's section under its heading.
    text = (out / "RESULTS.md").read_text()
    assert "## Toy counting\n\n### Counted to 3: cpu (" in text
    # A record its schema refuses is named, with the field, and not used.
    (out / "toy_suite_other.json").write_text(json.dumps({**record, "count": 0}))
    md = tmp_path / "R.md"
    assert results_report.main(["--results", str(out), "--out", str(md), "--no-readme"]) == 0
    assert "toy_suite_other.json): field 'count' is 0" in md.read_text()


def test_the_registry_reads_every_suite_without_importing_jax():
    # The front door lists and runs suites in child processes; it must not load jax (nor the
    # suites' measuring code), or it would hold the accelerator while the suites run.
    code = (
        "import sys, benchmarks.__main__, benchmarks.report.cli\n"
        "import importlib.util\n"
        "spec = importlib.util.find_spec('benchmarks.fusion.measure')\n"
        "print(sorted({'jax', 'jaxsim', 'agents'} & set(sys.modules)), type(spec).__name__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=_REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["[]", "ModuleSpec"]
