"""The report: the published records reproduce RESULTS.md, and no record is used silently wrong."""

import json
import re
import sys
from pathlib import Path

# benchmarks/ is a top-level folder of the repository, not part of the installed package.
_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from benchmarks.harness.paths import MANIFEST, RESULTS_DIR  # noqa: E402
from benchmarks.report import cli as results_report  # noqa: E402
from benchmarks.report import readme as readme_section  # noqa: E402
from benchmarks.report.cli import README, RESULTS_MD  # noqa: E402
from benchmarks.report.document import build  # noqa: E402


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


def _without_plots(text: str) -> list[str]:
    """`text`'s lines without the report's own plots (drawn only when plots are asked for)."""
    text = re.sub(r"\[report_[^]]*\.png\]\([^)]*\)(, )?", "", text)
    return [line for line in text.splitlines() if line and not line.startswith("![")]


def test_the_published_records_reproduce_results_md():
    # RESULTS.md is generated from benchmarks/results/: the report of those records, read
    # through every suite's schema and section, must be it (plots aside: they are not drawn).
    report = build([RESULTS_DIR], RESULTS_MD, None, plots=False, readme=README)
    assert not report.invalid
    assert _without_plots(report.results_md) == _without_plots(RESULTS_MD.read_text())


def _published(name: str) -> dict:
    return json.loads((RESULTS_DIR / name).read_text())


def test_report_chooses_a_record_per_machine_and_writes_the_readme_section(tmp_path):
    # The published records, placed as a run and a GPU check would place them.
    results, gpu = tmp_path / "results", tmp_path / "results" / "gpu_h200"
    gpu.mkdir(parents=True)
    throughput = _published("rollout_throughput_cpu2_vm_quick.json")
    fusion = _published("fusion_cpu2_vm_quick.json")
    on_gpu = _prov("NVIDIA H200", "gpu", command="python -m benchmarks.fusion --quick")
    files = {
        results / "rollout_throughput_cpu2_h_quick.json": throughput,
        results / "fusion_cpu2_h_quick.json": fusion,
        # A newer smoke record does not hide the quick one.
        results / "fusion_cpu2_h_smoke.json": {
            **fusion,
            "provenance": {**fusion["provenance"], "utc_time": "2099-01-01"},
        },
        gpu / "fusion.json": {**fusion, "interpret_mode": False, "provenance": on_gpu},
        gpu / "checks.json": {**fusion, "provenance": on_gpu, "results": []},  # no points
    }
    for path, data in files.items():
        path.write_text(json.dumps(data))
    md, readme = tmp_path / "RESULTS.md", tmp_path / "README.md"
    readme.write_text("# jaxsim\n\nintro\n\n## Latest results\n\nhand-typed, to be replaced\n")
    argv = ["--results", str(results), "--out", str(md), "--readme", str(readme)]
    assert results_report.main(argv) == 0
    text = md.read_text()
    assert "fusion_cpu2_h_quick.json" in text and "fusion_cpu2_h_smoke.json" not in text
    assert "### Scan vs fused rollouts: NVIDIA H200" in text and "checks.json" not in text
    assert "NVIDIA H200 (1 device(s)): fused ÷ scan = **" in text  # the headline's GPU cell
    # Plots go beside the report, never beside records that may be the committed ones.
    assert (tmp_path / "report_rollout_throughput_cpu2_h_quick.png").stat().st_size > 1000
    assert "](report_rollout_throughput_cpu2_h_quick.png)" in text
    assert not list(results.rglob("report_*.png"))
    # The README's section: between markers, from the same records; regenerating is stable.
    readme_text = readme.read_text()
    assert readme_text.startswith(
        "# jaxsim\n\nintro\n\n## Latest results\n\n" + readme_section.BEGIN
    )
    assert "hand-typed" not in readme_text and readme_text.rstrip().endswith(readme_section.END)
    assert "| jaxsim (scan) " in readme_text
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


def test_report_shows_a_run_at_one_size_beside_the_sweep_not_in_its_place(tmp_path, capsys):
    # A long run at N=4096 is newer than the machine's sweep, yet it lacks the sweep's
    # SyncVectorEnv row: both are shown, the headline and the summary read the sweep, and of two
    # sweeps (or two runs at one size) only the newer is shown; a smoke record is not shown.
    def record(utc, ns, medians, steps_per_call=None):
        data = _throughput_record(utc, {impl: {n: medians[impl] for n in ns} for impl in medians})
        data["config"] = {"repeats": 3, "min_time": 0.1, "num_envs": ns}
        if steps_per_call:
            data["config"]["steps_per_call"] = steps_per_call
        return data

    sweep = {"jaxsim": 4e6, "gymnasium_sync": 1e5}
    files = {
        "rollout_throughput_cpu2_h_old.json": record("2026-11-01", [1, 4096], sweep),
        "rollout_throughput_cpu2_h_quick.json": record("2026-11-02", [1, 4096], sweep),
        "rollout_throughput_cpu2_h_long_old.json": record(
            "2026-11-03", [4096], {"jaxsim": 5e6}, 4096000
        ),
        "rollout_throughput_cpu2_h_long.json": record(
            "2026-11-04", [4096], {"jaxsim": 6e6, "gymnasium_numpy": 2e6}, 4096000
        ),
        "rollout_throughput_cpu2_h_smoke.json": record("2026-11-05", [2], {"jaxsim": 1e3}),
    }
    for name, data in files.items():
        (tmp_path / name).write_text(json.dumps(data))
    text, _ = _report(tmp_path, tmp_path, capsys)
    used = text[text.index("## Records used") :]
    assert "_h_quick.json" in used and "_h_long.json" in used
    assert "_h_old.json" not in used and "_long_old.json" not in used and "_smoke" not in used
    assert "### Rollout throughput: cpu (TestCPU, 2 cores)\n" in text
    assert "### Rollout throughput: cpu (TestCPU, 2 cores), N=4096, 1000 steps a call\n" in text
    assert "jaxsim ÷ Gymnasium SyncVectorEnv = **40x** (CartPole-v1, N=4096)" in text
    assert "not measured (Gymnasium SyncVectorEnv" not in text
    report = build([tmp_path], tmp_path / "R.md", None, plots=False, readme=tmp_path / "README.md")
    assert re.search(r"\| implementation +\| +N=1 \| +N=4096 \|", report.summary)  # the sweep


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
    (results / MANIFEST).write_text("".join(json.dumps(e) + "\n" for e in runs))
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
