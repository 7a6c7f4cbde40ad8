"""The decoupled train command: checkpoints and resume, stop checks under the solve rule, the time
budget, seeds, bad input and missing simulators."""

import json
import sys

import numpy as np
import pytest

from agents.decoupled import (
    DecoupledConfig,
    MissingDependency,
)
from agents.decoupled import train as decoupled_train
from agents.decoupled.host_envs import make_pool

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # Gymnasium's Box precision notes

from test_decoupled import ENV, TINY, _leaves  # noqa: E402 (the same folder)


def _argv(out, *extra):
    return [
        "ppo",
        "--env",
        ENV,
        "--out",
        str(out),
        "--total-steps",
        "96",
        "--num-envs",
        "4",
        "--num-steps",
        "8",
        "--update-epochs",
        "1",
        "--num-minibatches",
        "1",
        "--hidden",
        "8",
        "--eval-envs",
        "2",
        "--log-every",
        "1",
        "--no-plot",
        "--quiet",
        *extra,
    ]


def test_command_interrupt_checkpoint_and_resume(tmp_path, monkeypatch):
    from agents.train import main

    real = decoupled_train.run_decoupled

    def interrupted_at_2(learner, dc, state, n, on_update, **kw):
        def hook(state, report):
            on_update(state, report)
            if report.update == 2:
                raise KeyboardInterrupt

        return real(learner, dc, state, n, hook, **kw)

    monkeypatch.setattr(decoupled_train, "run_decoupled", interrupted_at_2)
    with pytest.raises(SystemExit) as stop:
        main(_argv(tmp_path))
    assert stop.value.code == 130
    meta = json.loads((tmp_path / "config.json").read_text())
    assert meta["update"] == 2 and meta["schedule"] == "reproducible"
    monkeypatch.setattr(decoupled_train, "run_decoupled", real)
    summary = main(_argv(tmp_path, "--resume", "--profile", str(tmp_path / "prof")))
    assert int(summary["state"].update) == 3
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [1, 2, 3]
    assert (tmp_path / "eval.json").exists() and (tmp_path / "prof/decoupled_profile.json").exists()
    with pytest.raises(SystemExit):  # other flags than the checkpoint's
        main(_argv(tmp_path, "--resume", "--actors", "1"))
    before = (tmp_path / "checkpoint.msgpack").read_bytes()
    with pytest.raises(SystemExit) as refused:  # a run is there: neither --resume nor --overwrite
        main(_argv(tmp_path))
    assert refused.value.code == 2
    assert (tmp_path / "checkpoint.msgpack").read_bytes() == before


def _eval_json(out):
    return json.loads((out / "eval.json").read_text())


def test_command_stops_once_a_check_is_confirmed(tmp_path):
    from agents.train import main

    # Every CartPole episode lasts >= 8 steps: the first check (after update 1) and the
    # independent evaluation both reach 5, so the run stops there with that update's state.
    summary = main(_argv(tmp_path, "--total-steps", "320", "--target-return", "5"))
    assert int(summary["state"].update) == 1
    evaluation = _eval_json(tmp_path)
    assert evaluation["solved_per_seed"] == [True]
    assert evaluation["steps_to_target_per_seed"] == [32] and evaluation["steps"] == 32
    assert evaluation["episodes"] >= 32 and evaluation["mean_return"] >= 5
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [1] and rows[0]["solved_seeds"] == 1


def test_a_check_the_independent_evaluation_rejects_does_not_stop_the_run(tmp_path, monkeypatch):
    from agents.train import main

    seen = []

    def returns(self, state, episodes, seed):  # the check (2 episodes) at 10, the rest at 1
        seen.append((episodes, seed))
        return np.full(episodes, 10.0 if episodes == 2 else 1.0)

    monkeypatch.setattr(decoupled_train.HostEvaluator, "returns", returns)
    main(_argv(tmp_path, "--target-return", "5"))
    evaluation = _eval_json(tmp_path)
    assert evaluation["solved_per_seed"] == [False] and evaluation["steps"] == 96
    assert [r["update"] for r in evaluation["rejected_checks"]] == [1, 2, 3]
    # The same fields as the other agents' records (the reports name seed and env steps).
    assert [(r["seed"], r["step"]) for r in evaluation["rejected_checks"]] == [
        (0, 32), (0, 64), (0, 96)
    ]  # fmt: skip
    assert evaluation["mean_return"] == 1.0 and evaluation["episodes"] == 32
    checks = {seed for n, seed in seen if n == 2}
    confirms = {seed for n, seed in seen if n == 32}
    assert len(checks) == 3 and len(confirms) == 1 and not checks & confirms  # seeded apart


def test_command_stops_at_its_time_budget(tmp_path):
    from agents.train import main

    summary = main(_argv(tmp_path, "--total-steps", "320", "--target-return", "none",
                         "--time-budget", "0.001"))  # fmt: skip
    assert int(summary["state"].update) == 1
    evaluation = _eval_json(tmp_path)
    assert evaluation["steps"] == 32 and evaluation["solved_per_seed"] is None


def test_seeds_train_one_after_another_each_a_run_of_its_own(tmp_path):
    from agents.train import main

    summary = main(_argv(tmp_path, "--seeds", "2", "--seed", "4", "--target-return", "5"))
    evaluation = _eval_json(tmp_path)
    assert evaluation["seeds"] == [4, 5] and evaluation["solved_per_seed"] == [True, True]
    assert evaluation["steps_to_target_per_seed"] == [32, 32]
    for k, seed in enumerate((4, 5)):
        one = _eval_json(tmp_path / f"seed{k}")
        assert one["mean_return"] == evaluation["per_seed_mean_return"][k]
        assert json.loads((tmp_path / f"seed{k}/config.json").read_text())["seed"] == seed
    a, b = (s["state"] for s in summary["seeds"])
    assert not all(np.array_equal(x, y) for x, y in zip(_leaves(a), _leaves(b), strict=True))
    # --resume reads the finished seeds back instead of training them again.
    again = main(_argv(tmp_path, "--seeds", "2", "--seed", "4", "--target-return", "5", "--resume"))
    assert again["eval"]["per_seed_mean_return"] == evaluation["per_seed_mean_return"]


def test_bad_input_fails_before_work(capsys):
    from agents.train import main

    with pytest.raises(ValueError, match="actors=3 must divide num_envs=4"):
        DecoupledConfig(ENV, actors=3).check(TINY)
    with pytest.raises(ValueError, match="free schedule"):
        DecoupledConfig("envpool/CartPole-v1", envpool_batch_size=1).check(TINY)
    with pytest.raises(ValueError, match="schedule must be one of"):
        DecoupledConfig(ENV, schedule="fast").check(TINY)
    with pytest.raises(ValueError, match="unknown Gymnasium id"):
        make_pool("gymnasium/NoSuchEnv-v0", 1, 0)
    with pytest.raises(SystemExit):
        main(["dqn", "--env", ENV])
    assert "runs ppo" in capsys.readouterr().err


def test_missing_simulator_names_the_extra(monkeypatch, capsys):
    from agents.train import main

    monkeypatch.setitem(sys.modules, "envpool", None)  # import envpool -> ImportError
    with pytest.raises(MissingDependency, match=r"jaxsim-rl\[decoupled\]"):
        make_pool("envpool/CartPole-v1", 2, 0)
    with pytest.raises(SystemExit):
        main(["ppo", "--env", "envpool/Pong-v5", "--out", "/tmp/unused-decoupled"])
    assert "jaxsim-rl[decoupled]" in capsys.readouterr().err
