"""Solved means solved in the benchmarks: jaxsim's confirmations kept for the records, SB3's
checks judged by the same rule, and records whose solved seeds disagree named as broken."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.loop import MIN_EPISODES, ChunkReport
from benchmarks.baselines import offpolicy_sb3
from benchmarks.harness import solved
from benchmarks.offpolicy_solve import suite as solve_suite
from benchmarks.ppo import suite as ppo_suite

SB3_MISSING = offpolicy_sb3.sb3_missing()
needs_sb3 = pytest.mark.skipif(SB3_MISSING is not None, reason=str(SB3_MISSING))


def _report(done, checks, confirms, solved_update):
    confirm = None if confirms is None else np.array(confirms, dtype=float)
    return ChunkReport(done, None, None, np.array(checks), confirm, list(solved_update))


def test_confirmations_keep_what_confirmed_each_seed_and_every_rejected_check():
    log = solved.Confirmations(seeds=2)
    log.observe(_report(4, [100.0, 90.0], None, [None, None]), step=1024)  # nobody at the target
    # Both checks reach 475; the independent evaluation confirms seed 1 only.
    log.observe(_report(8, [480.0, 500.0], [430.0, 490.0], [None, 8]), step=2048)
    # Seed 1 is frozen (not a candidate: NaN); seed 0 is confirmed now.
    log.observe(_report(12, [490.0, 500.0], [495.0, math.nan], [12, 8]), step=3072)
    fields = log.fields([12, 8])
    assert fields["solved_per_seed"] == [True, True]
    assert fields["confirm_return_per_seed"] == [495.0, 490.0]
    assert fields["rejected_checks"] == [
        {"seed": 0, "step": 2048, "check_return": 480.0, "confirm_return": 430.0}
    ]
    assert f">= {MIN_EPISODES} episodes" in fields["solved_rule"]
    assert solved.MIN_EPISODES == MIN_EPISODES  # the reports' copy, kept jax-free


def test_judge_needs_both_evaluations_and_enough_episodes():
    assert solved.judge(480.0, [500.0] * MIN_EPISODES, 475.0)["solved"]
    point = solved.judge(480.0, [400.0] * MIN_EPISODES, 475.0)
    assert point == {"confirm_return": 400.0, "confirm_episodes": MIN_EPISODES, "solved": False}
    with pytest.raises(ValueError, match=f"must hold >= {MIN_EPISODES} episodes, got 5"):
        solved.judge(480.0, [500.0] * 5, 475.0)
    curve = [{"step": 1, "mean_return": 480.0, **point}, {"step": 2, "solved": True}]
    assert solved.first_solved(curve)["step"] == 2
    assert solved.rejected_in(curve, seed=3) == [
        {"seed": 3, "step": 1, "check_return": 480.0, "confirm_return": 400.0}
    ]


def test_records_whose_solved_seeds_disagree_with_their_steps_are_named():
    run = {"seeds": 2, "target": 475.0, "sps_whole_loop": 1e4}
    good = {**run, "solved_per_seed": [True, False], "per_seed_steps_to_target": [2048, None]}
    assert ppo_suite.problems({"jaxsim": {"CartPole-v1": good}}) == []
    bad = {**good, "solved_per_seed": [True, True]}
    (problem,) = ppo_suite.problems({"jaxsim": {"CartPole-v1": bad}})
    assert "field 'jaxsim.CartPole-v1.solved_per_seed' is [True, True] but" in problem
    # A record from before the rule has no solved_per_seed: shown, and said to be one.
    assert ppo_suite.problems({"jaxsim": {"CartPole-v1": run}}) == []
    assert solved.solved_cell({"steps": [1, None]}, "steps") == "1/2 (stop check only)"
    assert solved.solved_cell(good, "per_seed_steps_to_target") == "1/2"
    case = {
        "env": "CartPole-v1",
        "target": 475.0,
        "jaxsim": {"seeds": 1, "seeds_reached": 1, "train_wall_s_per_seed": 1.0,
                   "compile_s_per_seed": 0.5, "solved_per_seed": ["yes"],
                   "per_seed_steps_to_return": [4000]},
        "sb3": {"skipped": "--no-sb3"},
        "comparison": {"speedup": None},
    }  # fmt: skip
    (problem,) = solve_suite.problems({"cases": {"dqn": case}})
    assert problem == "field 'cases.dqn.jaxsim.solved_per_seed' is ['yes'], not a list of bools"


# ------------------------------------------------------------------------------ SB3, same rule
class _Evaluations:
    """Stands in for SB3's evaluate_policy: the check's env returns `check`, the confirming
    env `confirm` per episode; records how many episodes each was asked for."""

    def __init__(self, check, confirm):
        self.check, self.confirm, self.calls = check, confirm, []

    def __call__(self, model, env, n, deterministic, return_episode_rewards=False):
        assert deterministic
        self.calls.append((env, n))
        if env == "confirm":
            assert return_episode_rewards
            return [self.confirm] * n, [500] * n
        return self.check, 0.0


@needs_sb3
@pytest.mark.parametrize(("confirm", "stops"), [(400.0, False), (480.0, True)])
def test_sb3_stops_only_on_a_check_the_independent_evaluation_confirms(monkeypatch, confirm, stops):
    from stable_baselines3.common import evaluation

    from benchmarks.baselines.ppo_sb3 import eval_until_return

    fake = _Evaluations(check=490.0, confirm=confirm)
    monkeypatch.setattr(evaluation, "evaluate_policy", fake)
    callback = eval_until_return("check", 100, 10, 475.0, (0.0, 0.0), confirm_env="confirm")
    callback.model, callback.num_timesteps = None, 100
    assert callback._on_step() is (not stops)
    assert fake.calls == [("check", 10), ("confirm", MIN_EPISODES)]
    (point,) = callback.state["curve"]
    assert point["solved"] is stops and point["confirm_return"] == confirm
    # Below the target no confirmation runs, and training goes on.
    fake.check, fake.calls = 100.0, []
    callback.num_timesteps = 200
    assert callback._on_step() is True and fake.calls == [("check", 10)]
    assert "solved" not in callback.state["curve"][-1]
    with pytest.raises(ValueError, match="confirm_env is required"):
        eval_until_return("check", 100, 10, 475.0, (0.0, 0.0))


def test_rejected_note_names_seed_and_steps_or_the_update_of_older_records():
    rejected_note = solved.rejected_note
    assert rejected_note("jaxsim", []) is None
    new = {"seed": 1, "step": 9216, "update": 9, "check_return": 476.8, "confirm_return": 467.2}
    old = {"update": 308, "check_return": 476.8, "confirm_return": 467.2}  # decoupled, 2026-12-01
    assert "seed 1 at 9,216 steps: check 476.8, confirmation 467.2" in rejected_note("x", [new])
    assert "at update 308: check 476.8" in rejected_note("x", [old])
