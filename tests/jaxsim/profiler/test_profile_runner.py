"""`python -m jaxsim.profiler`: a module or a script run under the profiler, its arguments and
baseline."""

import sys
import textwrap

import pytest

from jaxsim.profiler import __main__ as cli

# -------------------------------------------------------------- `python -m jaxsim.profiler` runner
_TINY = """
    import sys
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(a, x):
        with jax.named_scope("matmul"):
            m = a @ a
        with jax.named_scope("elementwise"):
            x = jnp.tanh(x) * 2.0 + m[0, 0]
        return m / 256.0, x

    if __name__ == "__main__":
        print("argv", sys.argv[1:])
        a, x = jnp.ones((256, 256)) / 256, jnp.ones((256, 256))
        for _ in range(int(sys.argv[1])):
            a, x = step(a, x)
        if len(sys.argv) > 2:
            raise SystemExit(int(sys.argv[2]))
"""


@pytest.fixture
def tiny_module(tmp_path, monkeypatch):
    (tmp_path / "tinyprog.py").write_text(textwrap.dedent(_TINY))
    monkeypatch.chdir(tmp_path)  # as `python -m` does, the runner finds modules in the cwd
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path / "tinyprog.py"
    sys.modules.pop("tinyprog", None)


def test_runner_runs_a_module_with_its_arguments(tiny_module, tmp_path, capsys):
    out = tmp_path / "prof"
    # Options after the module name are the module's (here "-o" would be; "3" is).
    r = cli.main(["-o", str(out), "--phases", "matmul,elementwise", "-m", "tinyprog", "3"])
    printed = capsys.readouterr().out
    assert "argv ['3']" in printed and "jaxsim.profile tinyprog" in printed
    assert r.mode == "program" and r.name == "tinyprog"
    assert r.row("matmul").device_s > r.row("elementwise").device_s > 0
    assert r.executables["jit_step"] == 3 and r.compile_s > 0
    assert sorted(p.name for p in out.iterdir()) == [
        "tinyprog.json",
        "tinyprog.png",
        "tinyprog.trace.json.gz",
        "tinyprog.xplane.pb",
    ]
    assert sys.argv[0] != "tinyprog"  # restored


def test_runner_runs_a_script_and_a_failing_one_writes_nothing(tiny_module, tmp_path, capsys):
    r = cli.main(["--phases", "matmul", "--no-png", str(tiny_module), "2", "0"])  # exit(0): ok
    assert "argv ['2', '0']" in capsys.readouterr().out and r.row("matmul").device_s > 0
    out = tmp_path / "failed"
    with pytest.raises(SystemExit) as info:
        cli.main(["-o", str(out), str(tiny_module), "1", "3"])
    assert info.value.code == 3 and not out.exists()


def test_runner_argument_parsing():
    assert cli.split_argv(["-o", "d", "-m", "pkg.mod", "-o", "x"]) == (
        ["-o", "d"],
        ["-m", "pkg.mod", "-o", "x"],
    )
    assert cli.split_argv(["--phases", "a,b", "s.py", "--flag"]) == (
        ["--phases", "a,b"],
        ["s.py", "--flag"],
    )
    assert cli.split_argv(["--name=n", "-mpkg", "1"]) == (["--name=n"], ["-m", "pkg", "1"])
    with pytest.raises(SystemExit):  # no target
        cli.main(["-o", "d"])
    with pytest.raises(SystemExit):  # a bad phase list fails before the target runs
        cli.main(["--phases", "a/b", "-m", "never_imported_module"])


@pytest.mark.slow
def test_runner_baseline_calibrates_and_checks_the_corrected_run_time(tiny_module, capsys):
    r = cli.main(["--baseline", "2", "--phases", "matmul", "--no-png", "-m", "tinyprog", "20"])
    b = r.baseline
    assert len(b["runs"]) == 2 and all(run["wall_s"] > run["compile_s"] > 0 for run in b["runs"])
    # Calibrated on the first run, checked against the second.
    assert r.overhead["measured_s"] is not None and b["validation_runs"] == 1
    assert b["error"] is not None and r.overhead["corrected_error"] == b["error"]
    assert b["model_error"] is not None and b["uncorrected_error"] is not None
    assert "baseline (2 uninstrumented run(s))" in capsys.readouterr().out
