"""A trained run can be watched: train writes episode.gif, `python -m agents.play DIR` replays
the run's deterministic evaluation (the same returns as its eval.json) and films an episode."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agents import play, train

pytest.importorskip("PIL", reason="the episode GIF needs Pillow (the `render` extra)")
from PIL import Image

TINY = [
    "ppo", "--env", "CartPole-v1", "--seeds", "2", "--seed", "3", "--total-steps", "128",
    "--num-envs", "2", "--num-steps", "32", "--num-minibatches", "2", "--update-epochs", "1",
    "--hidden", "8", "--eval-envs", "3", "--log-every", "1", "--quiet",
]  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    summary = train.main([*TINY, "--out", str(out)])
    return out, summary


def test_train_writes_a_readable_gif_of_one_evaluation_episode(run):
    out, summary = run
    assert summary["gif"] == str(out / "episode.gif")
    with Image.open(out / "episode.gif") as gif:
        assert gif.size == (300, 200)  # CartPole's 600x400 at the default scale 0.5
        total_ms = 0
        for i in range(gif.n_frames):
            gif.seek(i)
            total_ms += gif.info["duration"]
    # One frame per step of the episode plus its first and terminal states, at 50 fps.
    returns = play.evaluate(*_agent_and_runner(out), seed=3, num_seeds=2)
    assert total_ms == (int(returns[0, 0]) + 1) * 20


def _agent_and_runner(out):
    from agents.checkpoint import load_checkpoint

    ckpt = load_checkpoint(str(out / "checkpoint.msgpack"))
    return ckpt.agent, ckpt.runner


def test_play_reproduces_the_runs_evaluation_return(run, tmp_path, capsys):
    out, summary = run
    recorded = json.loads((out / "eval.json").read_text())
    result = play.main([str(out), "--gif", str(tmp_path / "again.gif"), "--seed-index", "1"])
    assert result["returns"].shape == (2, 33)  # 3 episodes a batch, >= 32 (MIN_EPISODES)
    np.testing.assert_allclose(result["returns"].mean(axis=1), recorded["per_seed_mean_return"])
    assert result["mean_return"] == pytest.approx(recorded["mean_return"], abs=1e-6)
    printed = capsys.readouterr().out
    assert "eval.json recorded" in printed and "seed 1: mean" in printed
    with Image.open(result["gif"]) as gif:
        assert gif.n_frames >= 1
    agent, runner = _agent_and_runner(out)
    filmed = play.film_episode(agent, runner, 3, 2, str(tmp_path / "x.gif"), seed_index=1)
    assert filmed == pytest.approx(result["returns"][1, 0])  # the filmed episode is evaluated


def test_play_rejects_a_folder_without_a_run_and_a_bad_seed_index(run, tmp_path, capsys):
    with pytest.raises(SystemExit):
        play.main([str(tmp_path)])
    assert "no checkpoint.msgpack" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        play.main([str(run[0]), "--seed-index", "2", "--no-gif"])
    assert (
        "--seed-index (the run's seeds) must be an integer >= 0 and < 2, got 2"
        in capsys.readouterr().err
    )


@pytest.mark.parametrize("name", ["checkpoint.msgpack", "eval.json", "config.json", "metrics.csv"])
def test_a_gif_over_a_file_of_the_run_is_refused_before_work(run, capsys, monkeypatch, name):
    out = run[0]
    target = out / name
    before = target.read_bytes()
    monkeypatch.setattr(play, "evaluate", lambda *a, **k: pytest.fail("evaluated"))
    with pytest.raises(SystemExit) as info:
        play.main([str(out), "--gif", str(target)])
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert f"--gif {target}: refused, it would write over" in err and name in err
    assert target.read_bytes() == before


def test_a_gif_over_another_runs_file_or_into_a_folder_is_refused(run, tmp_path, capsys):
    out = run[0]
    other = tmp_path / "other"
    other.mkdir()
    (other / "eval.json").write_text("{}")  # a folder holding a run
    cases = [
        (other / "eval.json", f"would write over eval.json of the run in {other}"),
        (tmp_path, f"--gif {tmp_path}: is a folder"),
        (tmp_path / "none" / "x.gif", "no folder"),
    ]
    for gif, message in cases:
        with pytest.raises(SystemExit) as info:
            play.main([str(out), "--gif", str(gif), "--episodes", "1"])
        assert info.value.code == 2 and message in capsys.readouterr().err
    assert (other / "eval.json").read_text() == "{}"
