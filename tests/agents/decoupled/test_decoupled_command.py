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


def _refused(capsys, argv, *messages):
    """The command exits 2 with each of `messages` in its error and no traceback."""
    from agents.train import main

    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2, err
    assert "Traceback" not in err
    for message in messages:
        assert message in err, err
    return err


@pytest.fixture
def no_learner(monkeypatch):
    """Refusals come before the learner is built."""

    def built(*args, **kwargs):
        pytest.fail("the learner was built")

    monkeypatch.setattr(decoupled_train, "HostPPO", built)


def test_a_bad_seed_is_refused_by_name_before_the_learner_is_built(tmp_path, capsys, no_learner):
    _refused(capsys, _argv(tmp_path, "--seed", "-1"), "--seed must be an integer >= 0", "got -1")
    _refused(capsys, _argv(tmp_path, "--seed", str(2**64)), "--seed must be", str(2**64))
    last = 2**63 - 1  # seeds --seed and --seed + 1 must both fit 64 bits
    _refused(capsys, _argv(tmp_path, "--seeds", "2", "--seed", str(last)), f"<= {last - 1}")


def test_free_schedule_without_rlax_names_what_to_install(
    tmp_path, capsys, monkeypatch, no_learner
):
    monkeypatch.setitem(sys.modules, "rlax", None)  # import rlax -> ImportError
    _refused(
        capsys, _argv(tmp_path, "--schedule", "free"), "--schedule free:", "rlax",
        "pip install 'jaxsim-rl[decoupled]'",
    )  # fmt: skip


def test_a_cnn_on_flat_observations_is_a_named_error(tmp_path, capsys):
    _refused(capsys, _argv(tmp_path, "--network", "cnn"), "network='cnn' needs image observations")


def test_resume_of_a_corrupt_checkpoint_exits_2_naming_it(tmp_path, capsys, no_learner):
    (tmp_path / "checkpoint.msgpack").write_bytes(b"\x93 not a checkpoint")
    _refused(
        capsys, _argv(tmp_path, "--resume"),
        f"{tmp_path / 'checkpoint.msgpack'}: corrupt checkpoint",
    )  # fmt: skip


@pytest.mark.parametrize("seeds", ["1", "2"])
def test_resume_into_an_empty_folder_is_an_error(tmp_path, capsys, no_learner, seeds):
    _refused(capsys, _argv(tmp_path, "--resume", "--seeds", seeds), "--resume: no checkpoint at")
    assert not any(tmp_path.iterdir())


@pytest.fixture(scope="module")
def finished_one_seed(tmp_path_factory):
    from agents.train import main

    out = tmp_path_factory.mktemp("one_seed")
    main(_argv(out))
    return out


def _files(out):
    return {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}


def test_resume_names_each_changed_flag_and_refuses_other_seeds(finished_one_seed, capsys):
    out = finished_one_seed
    before = _files(out)
    _refused(capsys, _argv(out, "--resume", "--seeds", "2"), "--seeds 1, not --seeds 2")
    err = _refused(
        capsys, _argv(out, "--resume", "--num-envs", "8", "--hidden", "16", "--seed", "3"),
        "--num-envs 4, not --num-envs 8", "--hidden 8, not --hidden 16", "--seed 0, not --seed 3",
    )  # fmt: skip
    assert "learning_rate" not in err.strip().splitlines()[-1]  # only what differs
    _refused(capsys, _argv(out, "--resume", "--target-return", "5"), "not --target-return 5.0")
    assert _files(out) == before  # eval.json of the one seed is not overwritten


def test_resume_of_a_run_its_time_budget_stopped_trains_on(tmp_path, capsys):
    from agents.train import main

    main(_argv(tmp_path, "--target-return", "none", "--time-budget", "0.001"))
    assert _eval_json(tmp_path)["steps"] == 32  # one update of three
    spent = _argv(tmp_path, "--target-return", "none", "--resume", "--time-budget", "0.001")
    _refused(capsys, spent, "stopped at its time budget", "--time-budget 0.001 is spent already")
    summary = main(_argv(tmp_path, "--target-return", "none", "--resume"))
    assert int(summary["state"].update) == 3 and _eval_json(tmp_path)["steps"] == 96
    assert "the run stopped at its time budget after update 1" in capsys.readouterr().err
