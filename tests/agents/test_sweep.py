"""Hyperparameter sweeps in one jit: a sweep's configurations are their separate runs, shape
settings are refused by name, and the command writes the table and picks the best."""

from __future__ import annotations

import csv
import json

import jax
import numpy as np
import pytest

import jaxsim
from agents import (
    DQNConfig,
    PPOConfig,
    PQNConfig,
    SACConfig,
    checkpoint,
    dqn,
    make_train,
    pqn,
    sac,
    sweep_run,
    train,
)
from agents.sweep import check_sweep, sweep_configs, sweepable

TINY_PPO = PPOConfig(
    total_steps=3 * 2 * 16,
    num_envs=2,
    num_steps=16,
    num_minibatches=2,
    update_epochs=1,
    hidden=(8,),
    eval_envs=2,
    rollout_backend="scan",
)
GRID = {"learning_rate": [1e-3, 1e-2], "ent_coef": [0.0, 0.05]}

TINY_CLI = [
    "ppo", "--env", "CartPole-v1", "--seeds", "2", "--total-steps", "128", "--num-envs", "2",
    "--num-steps", "16", "--num-minibatches", "2", "--update-epochs", "1", "--hidden", "8",
    "--eval-envs", "4", "--log-every", "2", "--target-return", "none", "--no-plot", "--quiet",
]  # fmt: skip
SWEEP_FLAGS = ["--sweep", "learning_rate=1e-3,1e-2", "--sweep", "ent_coef=0,0.05"]


def _exits(capsys, argv, code=2):
    with pytest.raises(SystemExit) as info:
        train.main(argv)
    assert info.value.code == code
    return capsys.readouterr().err


def test_a_2x2_sweep_is_its_separate_runs():
    # Two compiles (the sweep, one configuration alone): 36 s at load ~11 on 2 cores.
    env = jaxsim.make("CartPole-v1")
    keys = jax.random.split(jax.random.key(3), 2)
    runner, metrics = jax.jit(jax.vmap(make_train(TINY_PPO, env, sweep=GRID)))(keys)
    configs = sweep_configs(TINY_PPO, check_sweep(TINY_PPO, GRID))
    assert [(c.learning_rate, c.ent_coef) for c in configs] == [
        (1e-3, 0.0),
        (1e-3, 0.05),
        (1e-2, 0.0),
        (1e-2, 0.05),
    ]
    assert np.shape(metrics.mean_return) == (2, 4, TINY_PPO.num_updates)  # [seeds, configs, T]
    alone, alone_metrics = jax.jit(jax.vmap(make_train(configs[3], env)))(keys)
    # The first rollout acts with the initial parameters: bit for bit.
    np.testing.assert_array_equal(
        np.asarray(metrics.mean_return[:, 3, 0]), np.asarray(alone_metrics.mean_return[:, 0])
    )
    mine = jax.tree.map(lambda x: np.asarray(x[:, 3]), runner.params)
    for a, b in zip(jax.tree.leaves(mine), jax.tree.leaves(alone.params), strict=True):
        np.testing.assert_allclose(a, np.asarray(b), rtol=0, atol=1e-5)
    np.testing.assert_allclose(
        np.asarray(metrics.loss.total[:, 3]), np.asarray(alone_metrics.loss.total), atol=1e-5
    )
    # Each swept value reached the program: configurations that differ in one value only
    # (0 and 1: ent_coef; 1 and 3: learning_rate) end with other actors.
    actor = [jax.tree.leaves(jax.tree.map(lambda x, c=c: np.asarray(x[:, c]), runner.params))[0]
             for c in range(4)]  # fmt: skip
    assert not np.array_equal(actor[0], actor[1])
    assert not np.allclose(actor[1], actor[3], atol=1e-4)


@pytest.mark.parametrize(
    ("algorithm", "config", "grid"),
    [
        (dqn, DQNConfig(total_steps=256, learning_starts=64, buffer_size=512, gradient_steps=2,
                        hidden=(8,)), {"tau": [0.5, 1.0], "end_e": [0.01, 0.1]}),
        (sac, SACConfig(total_steps=256, learning_starts=64, buffer_size=512, gradient_steps=2,
                        hidden=(8,)), {"learning_rate": [1e-3, 3e-4], "gamma": [0.9, 0.99]}),
        (pqn, PQNConfig(total_steps=1024, num_envs=8, num_steps=8, hidden=(8,)),
         {"learning_rate": [1e-3, 3e-4], "q_lambda": [0.5, 0.9]}),
    ],
)  # fmt: skip
def test_every_algorithm_traces_a_sweep(algorithm, config, grid):
    # Traced only (eval_shape, no compile): ~4 s each at load ~11 on 2 cores.
    env = jaxsim.make("Pendulum-v1" if algorithm is sac else "CartPole-v1")
    keys = jax.random.split(jax.random.key(0), 3)
    _, metrics = jax.eval_shape(jax.vmap(algorithm.make_train(config, env, sweep=grid)), keys)
    assert metrics.mean_return.shape == (3, 4, config.num_updates)


def test_a_shape_changing_key_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"num_envs, hidden cannot be swept: they change"):
        check_sweep(TINY_PPO, {"learning_rate": [1e-3], "num_envs": [2, 4], "hidden": [8]})
    with pytest.raises(ValueError, match=r"num_minibatches cannot be swept: it changes"):
        make_train(TINY_PPO, jaxsim.make("CartPole-v1"), sweep={"num_minibatches": [1, 2]})
    with pytest.raises(ValueError, match=r"PPOConfig has no field\(s\) \['lr'\]"):
        check_sweep(TINY_PPO, {"lr": [1e-3]})
    with pytest.raises(ValueError, match=r"learning_rate=-1.0: PPOConfig: learning_rate must be"):
        check_sweep(TINY_PPO, {"learning_rate": [1e-3, -1.0]})
    assert "tau" in sweepable(DQNConfig) and "num_envs" not in sweepable(DQNConfig)


def test_bad_sweep_flags_exit_2_naming_the_flag(capsys, tmp_path):
    out = ["--out", str(tmp_path / "o")]
    err = _exits(capsys, [*TINY_CLI, *out, "--sweep", "learning_rate"])
    assert "argument --sweep: expected NAME=V1,V2,..." in err and "'learning_rate'" in err
    err = _exits(capsys, [*TINY_CLI, *out, "--sweep", "learning_rate=1e-3,fast"])
    assert "argument --sweep: 'learning_rate=1e-3,fast': 'fast' is not a number" in err
    err = _exits(capsys, [*TINY_CLI, *out, "--sweep", "num_envs=2,4"])
    assert "--sweep num_envs=2,4: sweep: num_envs cannot be swept" in err
    err = _exits(capsys, [*TINY_CLI, *out, "--sweep", "ent_coef=0,1", "--sweep", "ent_coef=2"])
    assert "--sweep ent_coef=2: ent_coef is given twice (--sweep ent_coef=0,1)" in err
    err = _exits(capsys, [*TINY_CLI, "--learning-rate", "1e-3", *out, *SWEEP_FLAGS])
    assert "learning_rate is given both as a flag and as a sweep" in err
    assert not (tmp_path / "o" / "sweep.json").exists()


@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    # A checkpoint every 2 of the 4 updates changes nothing in the result.
    summary = train.main([*TINY_CLI, *SWEEP_FLAGS, "--checkpoint-every", "2", "--out", str(out)])
    return out, summary


def test_the_command_writes_the_table_and_picks_the_best(capsys, finished_sweep):
    # 14 s (the fixture's sweep) + 4 s at load ~11 on 2 cores.
    out, summary = finished_sweep
    train.main([*TINY_CLI, *SWEEP_FLAGS, "--out", str(out), "--resume"])  # finished: no training
    printed = capsys.readouterr().out
    with open(out / "sweep.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 * 2 and set(rows[0]) >= {"learning_rate", "ent_coef", "seed"}
    means = []
    for c in range(4):
        with open(out / f"config_{c:02d}" / "eval.json") as f:
            evaluation = json.load(f)
        per_seed = [float(r["final_eval_return"]) for r in rows if int(r["config"]) == c]
        np.testing.assert_allclose(per_seed, evaluation["per_seed_mean_return"])
        means.append(np.mean(per_seed))
        # Each configuration's folder is a run of its concrete config.
        with open(out / f"config_{c:02d}" / "config.json") as f:
            meta = json.load(f)
        assert meta["config"]["learning_rate"] == [1e-3, 1e-3, 1e-2, 1e-2][c]
        assert meta["config"]["ent_coef"] == [0.0, 0.05, 0.0, 0.05][c]
    with open(out / "sweep.json") as f:
        sweep = json.load(f)
    assert sweep["best"]["index"] == int(np.argmax(means)) == summary["best"]["index"]
    assert f"best {sweep['best']['index']} (" in printed
    assert "(best)" in (out / "sweep.md").read_text()
    # --resume checks the sweep's values, naming each changed one, before anything compiles.
    changed = ["--sweep", "learning_rate=1e-3,3e-3", "--sweep", "ent_coef=0,0.05"]
    err = _exits(capsys, [*TINY_CLI, *changed, "--out", str(out), "--resume"])
    assert (
        "learning_rate: the run's --sweep learning_rate=0.001,0.01, not --sweep "
        "learning_rate=0.001,0.003" in err
    )
    err = _exits(capsys, [*TINY_CLI, *SWEEP_FLAGS, "--out", str(out)])
    assert "already holds a sweep" in err


def test_a_stopped_sweep_resumes_to_the_uninterrupted_one(tmp_path, monkeypatch, finished_sweep):
    # 17 s at load ~11 on 2 cores: the stopped sweep, then its resumption.
    out, summary = finished_sweep
    saves = []

    def save_then_stop(*args, **kwargs):
        checkpoint.save_checkpoint(*args, **kwargs)
        saves.append(args[0])
        if len(saves) == 4:  # every configuration saved at update 2, then preempted
            raise KeyboardInterrupt

    stopped = [*TINY_CLI, *SWEEP_FLAGS, "--checkpoint-every", "2", "--out", str(tmp_path / "s")]
    monkeypatch.setattr(sweep_run, "save_checkpoint", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        train.main(stopped)
    monkeypatch.undo()
    assert checkpoint.load_checkpoint(saves[0]).meta["update"] == 2
    resumed = train.main([*stopped, "--resume"])
    assert [c["per_seed_mean_return"] for c in resumed["configs"]] == [
        c["per_seed_mean_return"] for c in summary["configs"]
    ]
    for c in range(4):
        path = f"config_{c:02d}/checkpoint.msgpack"
        a = checkpoint.load_checkpoint(str(tmp_path / "s" / path))
        b = checkpoint.load_checkpoint(str(out / path))
        assert a.meta["update"] == b.meta["update"] == 4
        leaves = jax.tree.leaves(a.runner.params), jax.tree.leaves(b.runner.params)
        for x, y in zip(*leaves, strict=True):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
