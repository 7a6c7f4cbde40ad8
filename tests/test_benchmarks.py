"""The benchmark scripts run end to end, skip missing baselines, and never leave torn files."""

import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

# benchmarks/ is a top-level folder of the repository, not part of the installed package.
_REPO = str(Path(__file__).resolve().parents[1])
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

from benchmarks import rollout_throughput as rt  # noqa: E402
from benchmarks.harness import arguments, formatting, provenance, timing  # noqa: E402
from benchmarks.harness.record import append_jsonl, read_jsonl  # noqa: E402
from jaxsim.files import write_json_atomic  # noqa: E402

TINY = ["--repeats", "1", "--min-time", "0", "--steps-per-call", "256"]
OPTIONAL_IMPLS = rt.IMPLS.keys() - {"jaxsim", "physics_only"}
PROVENANCE_FIELDS = {
    "utc_time",
    "hostname",
    "cpu_model",
    "cpu_count",
    "platform",
    "python",
    "versions",
    "jax_backend",
    "device_kind",
    "num_devices",
    "commit",
    "command",
}


def test_quick_path_end_to_end(tmp_path):
    out = tmp_path / "rt.json"
    # The first baselines; the others are run by the front door's smoke test below.
    impls = ("jaxsim", "gymnasium_sync", "physics_only")
    argv = ["--quick", "--num-envs", "1,4", "--impls", ",".join(impls), *TINY, "--out", str(out)]
    assert rt.main(argv) == 0
    record = json.loads(out.read_text())
    assert PROVENANCE_FIELDS <= set(record["provenance"])
    assert {"jax", "jaxlib", "flax", "numpy", "gymnasium", "gymnax"} <= set(
        record["provenance"]["versions"]
    )
    assert record["config"]["quick"] and record["config"]["num_envs"] == [1, 4]
    assert all(c["pass"] for c in record["checks"].values())
    results = {(r["impl"], r["num_envs"]): r for r in record["results"]}
    assert set(results) == {(impl, n) for impl in impls for n in (1, 4)}
    for r in results.values():
        if r["status"] == "skipped":  # a baseline not installed here
            assert r["impl"] in OPTIONAL_IMPLS, r
            continue
        assert r["status"] == "ok", r
        assert r["steps_per_s"]["min"] <= r["steps_per_s"]["median"] <= r["steps_per_s"]["max"]
        assert all(c["pass"] for c in r["checks"].values())
    assert results["jaxsim", 4]["steps_per_call"] == 64 * 4  # n = max(32, 256 // 4)
    # Every implementation that ran was checked against jaxsim's env.step beforehand.
    for r in results.values():
        if r["status"] == "ok" and r["impl"] != "physics_only":
            assert record["checks"][r["dynamics_check"]]["pass"], r["impl"]
    assert results["jaxsim", 1]["compile_s"] > 0
    # 4096 envs were not run: the targets say so instead of inventing a verdict.
    assert {t["status"] for t in record["targets"]} == {"not measured"}
    assert not out.with_name(out.stem + ".partial.jsonl").exists()


def test_missing_baselines_are_reported_as_skipped(tmp_path, monkeypatch):
    # None in sys.modules makes `import gymnax` raise ImportError, as if not installed.
    monkeypatch.setitem(sys.modules, "gymnax", None)
    monkeypatch.setitem(sys.modules, "gymnasium", None)
    out = tmp_path / "rt.json"
    impls = "gymnax,gymnasium_sync,gymnasium_numpy,physics_only"
    assert rt.main(["--num-envs", "4096", "--impls", impls, *TINY, "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    results = {r["impl"]: r for r in record["results"]}
    for impl, module in [("gymnax", "gymnax"), ("gymnasium_numpy", "gymnasium")]:
        assert results[impl]["status"] == "skipped"
        assert module in results[impl]["reason"]
    assert results["physics_only"]["status"] == "ok"
    assert record["provenance"]["versions"]["gymnax"] is not None  # installed, just blocked
    targets = {t["name"]: t for t in record["targets"]}
    assert targets["jaxsim / gymnax"]["status"] == "not measured"


def test_sync_vector_env_is_skipped_at_65536():
    pytest.importorskip("gymnasium")
    cfg, _ = rt.parse_args(["--num-envs", "65536"])
    r = rt.measure("gymnasium_sync", 65536, cfg)
    assert r["status"] == "skipped" and "slow" in r["reason"]


def test_write_json_atomic_leaves_no_partial_file(tmp_path):
    path = tmp_path / "out.json"
    write_json_atomic(path, {"a": 1})
    assert path.stat().st_mode & 0o044  # readable beyond its owner, unlike mkstemp's 0600
    with pytest.raises(TypeError):
        write_json_atomic(path, {"a": 2, "bad": object()})
    assert json.loads(path.read_text()) == {"a": 1}
    with pytest.raises(ValueError):  # NaN is not JSON
        write_json_atomic(tmp_path / "new.json", {"x": float("nan")})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_append_jsonl_keeps_finished_records(tmp_path):
    path = tmp_path / "log.jsonl"
    append_jsonl(path, {"i": 0})
    append_jsonl(path, {"i": 1})
    with pytest.raises(TypeError):
        append_jsonl(path, {"i": object()})
    with open(path, "a") as f:  # a crash in the middle of a write
        f.write('{"i": 2, "tor')
    assert read_jsonl(path) == [{"i": 0}, {"i": 1}]


def test_time_fn_separates_compile_and_sees_retraces():
    f = jax.jit(lambda x: jnp.sin(x).sum())
    t = timing.time_fn(lambda: f(jnp.ones(7)), repeats=3, min_time=0.01)
    assert len(t.samples_s) == 3 and all(c >= 1 for c in t.calls_per_repeat)
    assert t.min_s <= t.median_s <= t.max_s
    assert t.compile_s is not None and 0 < t.compile_s <= t.first_call_s
    assert t.compiles_during_timing == 0 and float(t.last) == pytest.approx(7 * 0.841471)

    calls = []

    def reject(out):
        raise AssertionError("wrong output")

    with pytest.raises(AssertionError, match="wrong output"):  # checked before any timing
        timing.time_fn(lambda: calls.append(1), repeats=3, check=reject)
    assert len(calls) == 1

    new_shapes = iter([jnp.ones(k) for k in range(1, 5)])
    t = timing.time_fn(lambda: f(next(new_shapes)), repeats=2)
    assert t.compiles_during_timing == 3  # warm-up + 2 repeats, each a new shape


def test_provenance_and_formatting():
    p = provenance.provenance(packages=("gymnasium", "surely-not-installed-pkg"))
    assert PROVENANCE_FIELDS <= set(p)
    assert p["versions"]["surely-not-installed-pkg"] is None
    assert p["commit"] == "unknown" or len(p["commit"].removesuffix("-dirty")) == 40
    assert formatting.format_rate(20.2e6) == "20.2M" and formatting.format_rate(51e3) == "51k"
    assert formatting.format_rate(float("nan")) == "–" and formatting.format_ratio(2048) == "2,048x"
    assert formatting.format_duration(75.4) == "1:15"
    table = formatting.format_table(["impl", "N=1"], [["jaxsim", "1.2M"]])
    assert table.splitlines()[1] == "|--------|-----:|"
    table = formatting.format_table(["a", "b", "n"], [["x", "y", 1]], left=2)
    assert table.splitlines()[1] == "|---|---|--:|"


def test_comma_lists_parse_one_way():
    import argparse

    assert arguments.split_list(" a, b,,a ,") == ["a", "b"]
    assert arguments.int_list("1, 16,4096") == (1, 16, 4096)
    for bad in ("1,x", "0", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            arguments.int_list(bad)
    envs = arguments.name_list(("a", "b", "all"), "thing(s)")
    assert envs("all") == ("a", "b", "all") and envs("b,a") == ("b", "a")
    assert arguments.name_list(("a", "all"), "x", all_means_every=False)("all") == ("all",)
    with pytest.raises(argparse.ArgumentTypeError, match="unknown thing\\(s\\) 'c'"):
        envs("a,c")


# ------------------------------------------------------------------ baselines and their checks
def test_torch_cartpole_matches_jaxsim_dynamics():
    pytest.importorskip("torch")
    from benchmarks import baselines

    ref = baselines.reference_transitions("CartPole-v1", num_envs=16, steps=10)
    check = baselines.torch_dynamics_check("CartPole-v1", ref)
    assert check["pass"] and check["transitions"] > 100, check
    assert check["max_obs_err"] < 1e-5
    # A wrong constant is caught: the check compares, it does not just run.
    wrong = baselines.TorchCartPole
    try:
        baselines.TorchCartPole = type("Wrong", (wrong,), {"gravity": 10.0})
        assert not baselines.torch_dynamics_check("CartPole-v1", ref)["pass"]
    finally:
        baselines.TorchCartPole = wrong
    with pytest.raises(baselines.Skipped, match="CartPole-v1 only"):
        baselines.torch_dynamics_check("Pendulum-v1", ref)


def test_missing_optional_baselines_are_skipped_not_zero(tmp_path, monkeypatch):
    # As if neither EnvPool nor PyTorch were installed: each is a record with a reason.
    monkeypatch.setitem(sys.modules, "envpool", None)
    monkeypatch.setitem(sys.modules, "torch", None)
    out = tmp_path / "rt.json"
    args = ["--num-envs", "8", "--impls", "envpool,torch", *TINY, "--out", str(out)]
    assert rt.main(args) == 0
    record = json.loads(out.read_text())
    results = {r["impl"]: r for r in record["results"]}
    for impl in ("envpool", "torch"):
        assert results[impl]["status"] == "skipped", results[impl]
        assert impl in results[impl]["reason"] and "steps_per_s" not in results[impl]


# -------------------------------------------------------------------------------- front door
from benchmarks import __main__ as front  # noqa: E402
from benchmarks.harness import report as results_report  # noqa: E402


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
    def args(name, mode, baselines=front.BASELINES, gpu=False):
        return front.SUITES[name].args(front.Plan(mode, frozenset(baselines), gpu))

    quick = args("throughput", "quick")
    assert (
        quick[:3] == ["--quick", "--envs", "all"] and "envpool" in quick[quick.index("--impls") + 1]
    )
    assert args("throughput", "quick", ["gymnax"])[4] == "jaxsim,jaxsim_rewards,gymnax,physics_only"
    assert "1048576" in args("throughput", "full", gpu=True)[-3]
    assert "--no-sb3" in args("ppo", "quick", ["gymnax"]) and "--no-sb3" not in args("ppo", "full")
    assert "gym_sync" not in args("breakdown", "quick", [])[1]
    assert args("fusion", "quick", gpu=True) == ["--quick"]  # the GPU's own quick grid
    for name in ("throughput", "fusion", "ppo", "breakdown"):
        for mode in front.MODES:
            assert "--out" not in args(name, mode)  # the front door chooses the record's path


_FAKE_SUITE = """
import argparse, json, sys, time
p = argparse.ArgumentParser()
p.add_argument("--behave")
p.add_argument("--out")
a = p.parse_args()
print("fake suite working", flush=True)
if a.behave == "hang":
    time.sleep(120)
if a.behave == "crash":
    sys.exit(3)
json.dump({"benchmark": "fusion", "provenance": {"command": "fake"}, "results": []},
          open(a.out, "w"))
"""


def test_front_door_keeps_finished_records_when_a_suite_fails_or_hangs(tmp_path, monkeypatch):
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "fake_suite.py").write_text(_FAKE_SUITE)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "mods"))
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    monkeypatch.setattr(
        front,
        "probe_machine",
        lambda: {
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
        },
    )
    suites = {
        name: front.Suite(
            name, "fake_suite", f"fake_{name}", name, lambda p, b=name: ["--behave", b]
        )
        for name in ("ok", "crash", "hang")
    }
    suites["gone"] = front.Suite(
        "gone",
        "benchmarks.not_there",
        "gone",
        "gone",
        lambda p: [],
        missing_reason="not written yet",
    )
    monkeypatch.setattr(front, "SUITES", suites)
    out = tmp_path / "results"
    argv = ["run", "--smoke", "--quiet", "--timeout-s", "3", "--out", str(out)]
    for name in ("ok", "crash", "gone", "hang"):
        argv += ["--suite", name]
    assert front.main(argv) == 1  # some failed, and the run carried on past them
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
    assert by_suite["hang"]["wall_s"] < 30
    summary = entries[-1]
    assert summary["event"] == "run" and summary["suites"]["ok"] == "ok"
    # Append-only: a second run adds lines and leaves the first run's intact.
    assert front.main([*argv[:-6], "--suite", "ok"]) == 0
    assert read_jsonl(out / front.MANIFEST)[: len(entries)] == entries


# ------------------------------------------------------------------------------------ report
def _prov(device_kind="cpu", backend="cpu", utc="2026-11-29T12:00:00+00:00", command="cmd"):
    return {
        "utc_time": utc,
        "hostname": "h",
        "cpu_model": "TestCPU",
        "cpu_count": 2,
        "cpu_count_available": 2,
        "loadavg_1_5_15min": [1.0, 1.0, 1.0],
        "python": "3.11.7",
        "versions": {"jax": "0.10.2", "jaxlib": "0.10.2", "envpool": None},
        "jax_backend": backend,
        "device_kind": device_kind,
        "num_devices": 1,
        "commit": "abc123",
        "command": command,
    }


def _point(impl, env_id, n, median, status="ok", **kw):
    if status != "ok":
        return {"impl": impl, "env_id": env_id, "num_envs": n, "status": status, **kw}
    sps = {"median": median, "min": 0.9 * median, "max": 1.1 * median}
    return {
        "impl": impl,
        "env_id": env_id,
        "num_envs": n,
        "status": "ok",
        "steps_per_s": sps,
        "compile_s": kw.pop("compile_s", None),
        **kw,
    }


def _fixture_records(root):
    cpu = root / "results"
    gpu = cpu / "gpu_h200"
    gpu.mkdir(parents=True)
    check = {"pass": True, "transitions": 100, "max_obs_err": 0.0}
    throughput = {
        "benchmark": "rollout_throughput",
        "provenance": _prov(),
        "wall_s": 12.0,
        "config": {"repeats": 3, "min_time": 0.1, "quick": True},
        "checks": {"CartPole-v1/gymnasium_dynamics": check, "CartPole-v1/torch_dynamics": check},
        "targets": [],
        "results": [
            _point(
                "jaxsim",
                "CartPole-v1",
                1,
                1e5,
                compile_s=0.5,
                dynamics_check="CartPole-v1/gymnasium_dynamics",
            ),
            _point(
                "jaxsim",
                "CartPole-v1",
                4096,
                2e7,
                compile_s=0.75,
                dynamics_check="CartPole-v1/gymnasium_dynamics",
            ),
            _point(
                "gymnasium_sync",
                "CartPole-v1",
                1,
                5e4,
                dynamics_check="CartPole-v1/gymnasium_dynamics",
            ),
            _point(
                "gymnasium_sync",
                "CartPole-v1",
                4096,
                1e5,
                dynamics_check="CartPole-v1/gymnasium_dynamics",
            ),
            _point("torch", "CartPole-v1", 1, 1e4, dynamics_check="CartPole-v1/torch_dynamics"),
            _point("torch", "CartPole-v1", 4096, 1e6, dynamics_check="CartPole-v1/torch_dynamics"),
            _point(
                "envpool",
                "CartPole-v1",
                1,
                0,
                "skipped",
                reason="envpool is not importable: No module named 'envpool'",
            ),
            _point(
                "envpool",
                "CartPole-v1",
                4096,
                0,
                "skipped",
                reason="envpool is not importable: No module named 'envpool'",
            ),
        ],
    }
    fusion_point = dict(
        env_id="CartPole-v1",
        policy="random",
        outputs="stats",
        num_envs=1024,
        status="ok",
        bytes_per_step=10.0,
        compile_s=1.0,
    )
    fusion_cpu = {
        "benchmark": "fusion",
        "provenance": _prov(command="python -m benchmarks.fusion --quick"),
        "interpret_mode": True,
        "checks": {"c": {"pass": True, "max_rel_err": 0.0}},
        "targets": [],
        "results": [
            {**fusion_point, "backend": "scan", "k": None, "steps_per_s": {"median": 2e7}},
            {**fusion_point, "backend": "fused", "k": 16, "steps_per_s": {"median": 1e6}},
        ],
    }
    fusion_gpu = {
        **fusion_cpu,
        "interpret_mode": False,
        "provenance": _prov("NVIDIA H200", "gpu", command="python -m benchmarks.fusion --quick"),
        "results": [
            {**fusion_point, "backend": "scan", "k": None, "steps_per_s": {"median": 1e9}},
            {**fusion_point, "backend": "fused", "k": 64, "steps_per_s": {"median": 1.2e10}},
        ],
    }
    files = {
        cpu / "rollout_throughput_cpu2_h_quick.json": throughput,
        # An older full record of another machine kind and a newer smoke one: neither hides it.
        cpu / "fusion_cpu2_h_quick.json": fusion_cpu,
        cpu / "fusion_cpu2_h_smoke.json": {**fusion_cpu, "provenance": _prov(utc="2027-01-01")},
        gpu / "fusion.json": fusion_gpu,
        gpu / "checks.json": {**fusion_gpu, "results": []},  # --check-only: no points
    }
    for path, data in files.items():
        path.write_text(json.dumps(data))
    manifest = {
        "run_id": "r1",
        "event": "suite",
        "suite": "offpolicy",
        "status": "skipped",
        "mode": "quick",
        "reason": "benchmarks/offpolicy.py does not exist",
    }
    (cpu / front.MANIFEST).write_text(json.dumps(manifest) + "\n")
    return cpu


def test_report_turns_fixed_records_into_the_expected_tables(tmp_path):
    results = _fixture_records(tmp_path)
    md, readme = tmp_path / "RESULTS.md", tmp_path / "README.md"
    readme.write_text("# jaxsim\n\nintro\n\n## Latest results\n\nhand-typed, to be replaced\n")
    argv = ["--results", str(results), "--out", str(md), "--readme", str(readme)]
    assert results_report.main(argv) == 0
    text = md.read_text()
    # The throughput table, its same-run ratios, and the missing baseline reported as skipped
    # with its reason, never as a zero.
    expected = """\
#### CartPole-v1

| implementation          | dynamics check      | compile s |       N=1 |    N=4096 |
|-------------------------|---------------------|----------:|----------:|----------:|
| jaxsim (scan)           | ✓ (100 transitions) |      0.75 | 100k ±10% |  20M ±10% |
| Gymnasium SyncVectorEnv | ✓ (100 transitions) |         – |  50k ±10% | 100k ±10% |
| eager PyTorch           | ✓ (100 transitions) |         – |  10k ±10% |   1M ±10% |

Same-run ratios (medians):

| ratio                            | N=1 | N=4096 |
|----------------------------------|----:|-------:|
| jaxsim ÷ Gymnasium SyncVectorEnv |  2x |   200x |
| jaxsim ÷ eager PyTorch           | 10x |    20x |

Not measured:
- EnvPool (CartPole-v1): envpool is not importable: No module named 'envpool'
"""
    assert expected in text, text
    assert "EnvPool |" not in text
    # The published figures beside the measured, same-run ones; GPU records marked by device.
    headline = {
        row[0]: row
        for row in (
            [c.strip() for c in line.split("|")[1:-1]]
            for line in text.splitlines()
            if line.startswith("| ") and "arXiv" in line
        )
    }
    cpu = "cpu (TestCPU, 2 cores)"
    assert headline["GPU-vectorized simulation vs CPU simulators"][2:] == [
        "up to 1024x",
        f"{cpu}: jaxsim ÷ Gymnasium SyncVectorEnv = **200x** (CartPole-v1, N=4096)<br>GPU: not "
        "measured (no GPU throughput record; the GPU machine has no CPU simulator to compare "
        "within one run)",
    ]
    assert headline["XLA implementation vs eager DNN-framework one"][3].startswith(
        f"{cpu}: jaxsim ÷ eager-PyTorch CartPole = **20x** (CartPole-v1, N=4096)"
    )
    fusion = headline["Kernel fusion of simulator steps, CartPole"][3]
    assert (
        "not measured: needs a GPU (here the kernel runs in Pallas interpret mode: fused ÷ "
        "scan = 0.05x, random/stats, N=1024, K=16, is a correctness cost, not a speed)" in fusion
    )
    assert (
        "NVIDIA H200 (1 device(s)): fused ÷ scan = **12x** (random/stats, N=1024, K=64)" in fusion
    )
    assert (
        "benchmarks/offpolicy.py does not exist"
        in headline["On-policy vs off-policy: more simulation-bound"][3]
    )
    # The quick CPU fusion record is used, not the newer smoke one; the GPU's beside it.
    assert "fusion_cpu2_h_quick.json" in text and "fusion_cpu2_h_smoke.json" not in text
    assert "### Scan vs fused rollouts: NVIDIA H200" in text and "interpret mode (no GPU)" in text
    # Plots go beside the report, never beside records that may be the committed ones.
    assert (tmp_path / "report_rollout_throughput_cpu2_h_quick.png").stat().st_size > 1000
    assert "](report_rollout_throughput_cpu2_h_quick.png)" in text
    assert not list(results.glob("report_*.png"))
    # The README's section: between markers, from the same records; regenerating is stable.
    readme_text = readme.read_text()
    assert readme_text.startswith(
        "# jaxsim\n\nintro\n\n## Latest results\n\n" + results_report.BEGIN
    )
    assert "hand-typed" not in readme_text and readme_text.rstrip().endswith(results_report.END)
    assert "| jaxsim (scan)           | 100k |    20M |" in readme_text
    assert results_report.main(argv) == 0
    assert readme.read_text() == readme_text and md.read_text() == text


# ------------------------------------------------------------------- report: no silent failures
def _throughput_record(utc, medians):
    """A small CartPole throughput record: {impl: {num_envs: median env-steps/s}}."""
    return {
        "benchmark": "rollout_throughput",
        "provenance": _prov(utc=utc),
        "config": {"repeats": 3, "min_time": 0.1},
        "checks": {},
        "targets": [],
        "results": [
            _point(impl, "CartPole-v1", n, median)
            for impl, by_n in medians.items()
            for n, median in by_n.items()
        ],
    }


def _report(results, tmp_path, capsys):
    md = tmp_path / "RESULTS.md"
    argv = ["--results", str(results), "--out", str(md), "--no-readme", "--no-plots"]
    assert results_report.main(argv) == 0
    return md.read_text(), capsys.readouterr().err


def test_report_says_when_the_newest_record_is_truncated_and_an_older_one_is_shown(
    tmp_path, capsys
):
    import os

    results = tmp_path / "results"
    results.mkdir()
    old = results / "rollout_throughput_cpu2_h.json"
    medians = {"jaxsim": {4096: 2e7}, "gymnasium_sync": {4096: 1e5}}
    old.write_text(json.dumps(_throughput_record("2026-11-01T00:00:00+00:00", medians)))
    new = results / "rollout_throughput_cpu2_h_quick.json"
    text = json.dumps(_throughput_record("2026-11-29T00:00:00+00:00", medians))
    new.write_text(text[: len(text) // 2])  # a copy cut short
    os.utime(new, (old.stat().st_mtime + 60,) * 2)
    md, err = _report(results, tmp_path, capsys)
    # Named in a section of its own and on stderr, with what is wrong...
    assert "## Invalid records" in md and "not valid JSON" in md
    assert f"invalid record {new}: not valid JSON" in err
    # ...and the older record shown in its place says so, under its heading.
    section = md.split("### Rollout throughput: cpu (TestCPU, 2 cores)\n\n")[1]
    assert section.startswith(f"**Newer record `{new.name}` (not valid JSON")
    assert f"is invalid; showing older record `{old.name}`.**" in section.split("\n\n")[0]
    assert "showing older record" in err and "200x" in md  # the old record's figures, still
    # Without the older record there is nothing to show: the section says why.
    old.unlink()
    md, _ = _report(results, tmp_path, capsys)
    assert f"No valid record: `{new.name}` is invalid (not valid JSON" in md


def test_report_names_the_file_and_field_a_record_lacks(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    record = _throughput_record("2026-11-29T00:00:00+00:00", {"jaxsim": {1: 1e5, 4096: 2e7}})
    del record["results"][1]["steps_per_s"]["median"]
    del record["results"][0]["status"]
    path = results / "rollout_throughput_cpu2_h.json"
    path.write_text(json.dumps(record))
    nameless = {**_throughput_record("2026-11-29T00:00:00+00:00", {}), "provenance": None}
    del nameless["benchmark"]
    (results / "fusion_cpu2_h.json").write_text(json.dumps(nameless))
    (results / "environment.json").write_text(json.dumps({"jax": "0.10.2"}))  # not a record
    md, err = _report(results, tmp_path, capsys)
    for text in (md, err):
        line = next(x for x in text.splitlines() if "rollout_throughput_cpu2_h.json" in x)
        assert "lacks field 'results[0].status' (impl=jaxsim env_id=CartPole-v1 num_envs=1)" in line
        assert "lacks field 'results[1].steps_per_s.median' (impl=jaxsim" in line
        line = next(x for x in text.splitlines() if "fusion_cpu2_h.json" in x)
        assert "lacks field 'benchmark'" in line and "field 'provenance' is None" in line
    assert "KeyError" not in md and "environment.json" not in md
    assert "No valid record: `rollout_throughput_cpu2_h.json` is invalid" in md


def test_report_refuses_ratios_of_zero_negative_or_nan_figures(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    medians = {
        "jaxsim": {4096: 2e7},
        "gymnasium_sync": {4096: 0.0},
        "torch": {4096: -1e6},
        "gymnax": {4096: float("nan")},
    }
    path = results / "rollout_throughput_cpu2_h.json"
    path.write_text(json.dumps(_throughput_record("2026-11-29T00:00:00+00:00", medians)))
    ppo = {
        "benchmark": "ppo",
        "provenance": _prov(),
        "jaxsim": {"CartPole-v1": {"seeds": 3, "target": 475.0, "sps_whole_loop": 1e5}},
        "comparison": {"speedup": -3.0},
    }
    (results / "ppo_cpu2_h.json").write_text(json.dumps(ppo))
    md, err = _report(results, tmp_path, capsys)
    for text in (md, err):
        line = next(x for x in text.splitlines() if "rollout_throughput_cpu2_h.json" in x)
        assert "field 'results[1].steps_per_s.median' is 0.0: a rate" in line
        assert "field 'results[2].steps_per_s.median' is -1000000.0" in line
        assert "field 'results[3].steps_per_s.median' is nan" in line
        line = next(x for x in text.splitlines() if "ppo_cpu2_h.json" in x)
        assert "field 'comparison.speedup' is -3.0" in line
    # No ratio of them anywhere: neither the section's table nor the headline.
    assert "Same-run ratios" not in md and "jaxsim ÷" not in md and "-3x" not in md
    row = next(x for x in md.splitlines() if x.startswith("| GPU-vectorized simulation"))
    assert "cpu (TestCPU" not in row and "**" not in row  # no record left to measure from


# ------------------------------------------------------------------ report: on- vs off-policy
def _offpolicy_record(comparison=None):
    """An offpolicy record: PPO and DQN profiled on CartPole (PPO 10x more simulation-bound)."""

    def case(algorithm, kind, simulation):
        return {
            "algorithm": algorithm,
            "env": "CartPole-v1",
            "case": f"{algorithm}_CartPole-v1",
            "kind": kind,
            "status": "ok",
            "wall_s": 0.01,
            "steps_per_s": 5e4,
            "dispatches_per_iteration": 1.0,
            "category_shares": {"simulation": simulation, "learning": 1.0 - simulation},
            "device_busy_fraction": 0.9,
            "notes": f"one {algorithm} update",
        }

    return {
        "benchmark": "offpolicy",
        "provenance": _prov(),
        "results": [case("ppo", "on-policy", 0.2), case("dqn", "off-policy", 0.02)],
        "comparison": comparison
        if comparison is not None
        else [
            {
                "env": "CartPole-v1",
                "on_policy": "ppo",
                "off_policy": "dqn",
                "on_policy_simulation_share": 0.2,
                "off_policy_simulation_share": 0.02,
                "ratio": 10.0,
                "published": ">= 3.5x (RL-Scope, arXiv 2102.04285)",
            }
        ],
        "gymnasium_loops": "PPO only",
    }


def test_report_shows_the_on_policy_vs_off_policy_finding(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    (results / "offpolicy_cpu2_h.json").write_text(json.dumps(_offpolicy_record()))
    # An older run skipped the suite, a later one ran it: the old reason is not shown.
    runs = [
        {"run_id": "r1", "suite": "offpolicy", "status": "skipped", "reason": "no agents yet"},
        {"run_id": "r2", "suite": "offpolicy", "status": "ok", "record": "offpolicy_cpu2_h.json"},
    ]
    (results / front.MANIFEST).write_text("".join(json.dumps(e) + "\n" for e in runs))
    md, err = _report(results, tmp_path, capsys)
    row = next(x for x in md.splitlines() if x.startswith("| On-policy vs off-policy"))
    assert (
        "cpu (TestCPU, 2 cores): simulation share, one-jit jaxsim loops at the agents' presets: "
        "PPO ÷ DQN = **10x** (CartPole-v1: 20% vs 2% of an update simulating). Gymnasium-loop "
        "agents: PPO only" in row
    )
    assert "not measured" not in row and "no agents yet" not in md and not err
    section = md.split("## On-policy vs off-policy\n\n")[1]
    assert "| dqn_CartPole-v1 | off-policy |" in section and "- dqn_CartPole-v1: one dqn" in section
    pair = next(x for x in section.splitlines() if x.startswith("| CartPole-v1 "))
    assert [c.strip() for c in pair.split("|")[1:5]] == [
        "CartPole-v1",
        "PPO 20%",
        "DQN 2%",
        "**10x**",
    ]
    # A pair whose off-policy share is 0 has no ratio: said, never divided.
    zero = _offpolicy_record()
    zero["comparison"][0].update(off_policy_simulation_share=0.0, ratio=None)
    (results / "offpolicy_cpu2_h.json").write_text(json.dumps(zero))
    md, _ = _report(results, tmp_path, capsys)
    assert "PPO ÷ DQN = – (off-policy share 0)" in md and "**10x**" not in md


def test_report_names_what_an_offpolicy_record_lacks(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    bad = _offpolicy_record()
    bad["comparison"][0]["ratio"] = -1.0
    del bad["comparison"][0]["off_policy"]
    (results / "offpolicy_cpu2_h.json").write_text(json.dumps(bad))
    md, err = _report(results, tmp_path, capsys)
    for text in (md, err):
        line = next(x for x in text.splitlines() if "offpolicy_cpu2_h.json" in x)
        assert "lacks field 'comparison[0].off_policy'" in line
        assert "field 'comparison[0].ratio' is -1.0" in line
    row = next(x for x in md.splitlines() if x.startswith("| On-policy vs off-policy"))
    assert "not measured: no offpolicy record" in row and "**" not in row
