"""The benchmark scripts run end to end, skip missing baselines, and never leave torn files."""

import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

# benchmarks/ is a top-level folder of the repository, not part of the installed package.
_REPO = str(Path(__file__).resolve().parents[2])
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

# The report's record builders, for the off-policy tests that import them from here.
from test_benchmarks_report import _offpolicy_record, _prov, _report  # noqa: E402, F401

from atomicfiles import write_json_atomic  # noqa: E402
from benchmarks.harness import arguments, formatting, provenance, timing  # noqa: E402
from benchmarks.harness.record import append_jsonl, read_jsonl  # noqa: E402
from benchmarks.rollout_throughput import measure as rt  # noqa: E402

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


def test_figures_are_written_atomically_into_folders_not_yet_made(tmp_path):
    pytest.importorskip("matplotlib")
    from atomicfiles import write_figure_atomic
    from jaxsim.profiler import plot_stacked

    class Broken:  # a figure whose drawing fails half-way
        def savefig(self, buf, **kwargs):
            buf.write(b"\x89PNG partial")
            raise RuntimeError("drawing failed")

    png = tmp_path / "runs" / "bench" / "breakdown.png"  # as in a fresh clone: no runs/ yet
    plot_stacked({"a": {"x": 1.0, "y": 2.0}}, png, title="t")
    good = png.read_bytes()
    assert good.startswith(b"\x89PNG")
    with pytest.raises(RuntimeError):
        write_figure_atomic(Broken(), png)
    assert png.read_bytes() == good and sorted(p.name for p in png.parent.iterdir()) == [png.name]


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
    from benchmarks.baselines import torch_cartpole as baselines

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
