"""The train command fails early, clearly and non-zero; what it leaves on disk stays consistent."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from flax import serialization

from agents import checkpoint, logs, train
from jaxsim.cpu_threads import LAPACK_SAFE_THREADS, cpu_pool_size

TINY = [
    "ppo", "--env", "CartPole-v1", "--seeds", "2", "--total-steps", "128", "--num-envs", "2",
    "--num-steps", "32", "--num-minibatches", "2", "--update-epochs", "1", "--hidden", "8",
    "--eval-envs", "3", "--log-every", "1", "--no-plot", "--quiet",
]  # fmt: skip
# The sizes of test_play.py's run: its programs come from the suite's compilation cache.


def _exits(capsys, argv, code=2):
    with pytest.raises(SystemExit) as info:
        train.main(argv)
    assert info.value.code == code
    return capsys.readouterr().err


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    train.main([*TINY, "--out", str(out)])
    assert not (out / "episode.gif").exists() and not (out / "curve.png").exists()  # --no-plot
    return out


def test_an_out_that_is_a_file_or_unwritable_is_refused_before_compiling(capsys, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert "--out: " + str(afile) + " exists and is not a folder" in _exits(
        capsys, [*TINY, "--out", str(afile)]
    )
    assert "--out: cannot write to" in _exits(capsys, [*TINY, "--out", str(afile / "sub")])


def test_resume_with_another_env_says_what_differs(capsys, finished_run):
    err = _exits(
        capsys, [*TINY[:2], "Acrobot-v1", *TINY[3:], "--out", str(finished_run), "--resume"]
    )
    assert "was trained on jaxsim.make('CartPole-v1'), not jaxsim.make('Acrobot-v1')" in err
    assert "env CartPole-v1 -> Acrobot-v1" in err


def test_a_corrupt_checkpoint_is_named(capsys, tmp_path, finished_run):
    data = (finished_run / "checkpoint.msgpack").read_bytes()
    broken = tmp_path / "checkpoint.msgpack"
    broken.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"checkpoint.msgpack: corrupt checkpoint"):
        checkpoint.load_checkpoint(str(broken))
    err = _exits(capsys, [*TINY, "--out", str(tmp_path), "--resume"])
    assert "corrupt checkpoint" in err and str(broken) in err


def test_a_checkpoint_of_another_format_is_refused_by_name(tmp_path):
    # Format 1 held flax module variables; the parameters are plain layers since format 2.
    old = tmp_path / "checkpoint.msgpack"
    meta = json.dumps({"format": "jaxsim-agents-ppo/1"})
    old.write_bytes(serialization.msgpack_serialize({"meta": meta, "state": {}}))
    with pytest.raises(ValueError, match=r"'jaxsim-agents-ppo/1'; it reads jaxsim-agents-ppo/3"):
        checkpoint.load_checkpoint(str(old))


def test_stale_temporaries_go_and_config_json_follows_the_checkpoint(tmp_path, finished_run):
    out = tmp_path / "run"
    out.mkdir()
    for name in ("checkpoint.msgpack", "metrics.jsonl"):
        (out / name).write_bytes((finished_run / name).read_bytes())
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = out / f".checkpoint.msgpack.{dead.pid}.x1y2.tmp"
    stale.write_bytes(b"half a checkpoint")
    live = out / f".metrics.jsonl.{os.getpid()}.z3.tmp"  # a writer still running keeps its file
    live.write_bytes(b"")
    (out / "config.json").write_text("{}")  # killed between the checkpoint and its sidecar
    train.main([*TINY, "--out", str(out), "--resume"])
    assert not stale.exists() and live.exists()
    meta = json.loads((out / "config.json").read_text())
    assert meta == json.loads(json.dumps(checkpoint.read_meta(str(out / "checkpoint.msgpack"))[0]))


def test_a_diverged_run_exits_non_zero_and_writes_strict_json(capsys, tmp_path):
    err = _exits(capsys, [*TINY, "--learning-rate", "1e30", "--out", str(tmp_path)], code=1)
    assert "the run diverged" in err and "is not finite from update" in err
    for line in (tmp_path / "metrics.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=lambda c: pytest.fail(f"bare {c} in metrics.jsonl"))
    json.loads((tmp_path / "eval.json").read_text(), parse_constant=pytest.fail)
    rows = logs.read_metrics(str(tmp_path))
    assert logs.first_nonfinite(rows) is not None


def _snapshot(out):
    return {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}


def test_an_out_holding_a_run_is_refused_without_resume_or_overwrite(capsys, finished_run):
    before = _snapshot(finished_run)
    # The same algorithm, or another one (both default to runs/CartPole-v1).
    for argv in (TINY, ["dqn", "--env", "CartPole-v1", "--quiet"]):
        err = _exits(capsys, [*argv, "--out", str(finished_run)])
        assert f"--out: {finished_run} already holds a run (checkpoint.msgpack" in err
        assert "pass --resume to continue it, --overwrite to replace it" in err
    err = _exits(capsys, [*TINY, "--out", str(finished_run), "--resume", "--overwrite"])
    assert "--resume continues the run in --out, --overwrite replaces it" in err
    assert _snapshot(finished_run) == before  # refused before any work: nothing touched


def test_overwrite_replaces_the_run_and_leaves_nothing_of_the_old_one(tmp_path, finished_run):
    out = tmp_path / "run"
    out.mkdir()
    for name, data in _snapshot(finished_run).items():
        (out / name).write_bytes(data)
    (out / "curve.png").write_bytes(b"old curve")  # plots the new run (--no-plot) won't redraw
    (out / "episode.gif").write_bytes(b"old gif")
    (out / "notes.txt").write_text("mine")  # not a run file: kept
    summary = train.main([*TINY, "--seed", "7", "--out", str(out), "--overwrite"])
    assert not (out / "curve.png").exists() and not (out / "episode.gif").exists()
    assert (out / "notes.txt").read_text() == "mine"
    assert checkpoint.read_meta(str(out / "checkpoint.msgpack"))[0]["seed"] == 7
    assert json.loads((out / "eval.json").read_text()) == json.loads(json.dumps(summary["eval"]))


def test_overwrite_removes_nothing_a_run_did_not_write(capsys, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "config.json").write_text('{"my": "own settings"}')  # named like a run file
    (out / "metrics.csv").write_text("a,b\n1,2\n")
    err = _exits(capsys, [*TINY, "--out", str(out), "--overwrite"])
    assert "--overwrite:" in err and "no config.json a jaxsim run wrote" in err
    assert (out / "config.json").read_text() == '{"my": "own settings"}'
    assert (out / "metrics.csv").exists()


def test_resume_with_another_seed_is_refused_naming_both(capsys, finished_run):
    err = _exits(capsys, [*TINY, "--seed", "5", "--out", str(finished_run), "--resume"])
    assert "was trained with --seed 0, not --seed 5" in err and "pass --seed 0" in err


def test_a_brax_run_sizes_the_cpu_pool_or_says_it_could_not(capsys, tmp_path, monkeypatch):
    """Before anything starts JAX the command sizes XLA's CPU pool for brax's LAPACK kernels
    (tests/jaxsim/test_cpu_threads.py shows the deadlock it prevents); in this process JAX has
    started, so on a machine with fewer than 4 CPUs it says it could not and how to start."""
    monkeypatch.delenv("NPROC", raising=False)

    def stop(*_):  # the rest of the run (brax's import, its compiles) is not this test's
        raise SystemExit(0)

    monkeypatch.setattr(train, "_prepare", stop)
    with pytest.raises(SystemExit):
        train.main(["ppo", "--env", "brax/inverted_pendulum", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    if cpu_pool_size() < LAPACK_SAFE_THREADS:
        assert "[ppo brax/inverted_pendulum] XLA's CPU pool has" in out
        assert f"Start the process with NPROC={LAPACK_SAFE_THREADS}" in out
    else:
        assert "XLA's CPU pool" not in out


def test_resume_names_each_changed_flag_with_the_runs_value_and_the_new_one(capsys, finished_run):
    before = _snapshot(finished_run)
    changed = ["--num-envs", "4", "--hidden", "16", "--no-anneal-lr", "--seeds", "3"]
    err = _exits(capsys, [*TINY, *changed, "--out", str(finished_run), "--resume"])
    err = err.strip().splitlines()[-1]  # the message, after the usage
    for change in (
        "--seeds 2, not --seeds 3",
        "--num-envs 2, not --num-envs 4",
        "--hidden 8, not --hidden 16",
        "--anneal-lr, not --no-anneal-lr",
    ):
        assert change in err
    assert "learning_rate" not in err and "--gamma" not in err  # only what differs
    assert _snapshot(finished_run) == before


def test_resume_of_a_finished_run_refuses_a_new_target(capsys, finished_run):
    before = _snapshot(finished_run)
    err = _exits(capsys, [*TINY, "--target-return", "5", "--out", str(finished_run), "--resume"])
    assert "--target-return 475.0, not --target-return 5.0" in err
    assert _snapshot(finished_run) == before  # eval.json is not rewritten with another target


@pytest.mark.parametrize("seed", [2**63, -(2**63) - 1, 10**30])
def test_a_seed_beyond_64_bits_is_refused_by_name(capsys, tmp_path, seed):
    err = _exits(capsys, [*TINY, "--seed", str(seed), "--out", str(tmp_path)])
    assert f"--seed must be an integer >= {-(2**63)} and <= {2**63 - 1}, got {seed}" in err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--num-envs", "100000", "--total-steps", "3200000"], "--num-envs 100000: the training"),
        (["--eval-envs", "100000"], "--eval-envs 100000: the evaluation rollouts"),
    ],
)
def test_sizes_beyond_free_memory_are_refused_by_the_flags_name(
    capsys, tmp_path, monkeypatch, flags, message
):
    from jaxsim.rollout import checks as memory

    monkeypatch.setattr(memory, "_available_bytes", lambda: 10**7)  # 10 MB free
    err = _exits(capsys, [*TINY, *flags, "--out", str(tmp_path)])
    line = err.strip().splitlines()[-1]
    assert message in line and "x 2 seed(s) at once) do not fit in the memory" in line
    most = int(line.split("at most ")[1].split()[0])
    assert 0 < most < 100000 and "rollout:" not in line and "outputs=" not in line
    assert not (tmp_path / "checkpoint.msgpack").exists()
