"""Rollouts and agents on a device mesh: equal to the unsharded run, and bad meshes refused.

Multi-device checks run mesh_worker.py (and multihost_worker.py), beside this file, in
subprocesses with forced CPU devices, so XLA_FLAGS never reaches this process.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import jax
import numpy as np
import pytest
from jax.sharding import Mesh

import jaxsim
from agents.ppo import PPO, PPOConfig
from agents.train import main as train_main

HERE = os.path.dirname(os.path.abspath(__file__))  # tests/jaxsim: the workers
ROOT = os.path.dirname(os.path.dirname(HERE))
# Sums over the batch (episode statistics) add in another order on a mesh, and an MLP's
# matmuls in an order XLA picks by the shard's shape: those within the last bit. The
# environment's per-step floats are equal bit for bit here (README: the one exception is
# CartPole with a shared masspole and masscart, whose division by the shared total mass XLA
# rewrites in the partitioned program only).
FLOAT_TOL = 1e-5


def _env(devices: int) -> dict:
    flags = [os.environ.get("XLA_FLAGS", ""), f"--xla_force_host_platform_device_count={devices}"]
    env = dict(os.environ, XLA_FLAGS=" ".join(flags).strip())  # the suite's own flags kept
    env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")])
    return env


def _worker(cases: list[str], *args: str, devices: int = 2) -> dict:
    """{case: its result, or {"error": traceback}} from one mesh_worker.py process."""
    cmd = [sys.executable, os.path.join(HERE, "mesh_worker.py"), ",".join(cases), *args]
    proc = subprocess.run(cmd, env=_env(devices), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["devices"] == devices
    return out["cases"]


def _result(got: dict):
    assert "error" not in got, got["error"]
    return got["result"]


# The two-device cases run in one worker process, started once for the module (jax's start-up
# and the agents' imports are seconds each); each test reads its own case's result.
TWO_DEVICE_CASES = ["scan", "minatar", "fused", "checks", "ppo", "train"]


@pytest.fixture(scope="module")
def two_devices(tmp_path_factory) -> dict:
    train_out = tmp_path_factory.mktemp("train")
    return {"train_out": train_out, **_worker(TWO_DEVICE_CASES, str(train_out))}


def _assert_matches(cmp: dict) -> None:
    assert all(cmp["exact_equal"].values()), cmp
    gaps = cmp["float_gap"]
    # The environment's floats bit for bit; a policy's extras (an MLP's matmuls, which XLA
    # blocks by the batch's shape) within the last bit.
    assert all(gap == 0.0 for name, gap in gaps.items() if not name.startswith("extras")), cmp
    assert max(gaps.values()) < FLOAT_TOL, cmp
    assert cmp["per_step_split"] and cmp["final_state_split"], cmp
    assert cmp["stats_count_equal"] and cmp["stats_gap"] < FLOAT_TOL, cmp


# ------------------------------------------------------------------------- on forced CPU devices
@pytest.mark.slow
def test_scan_rollout_on_mesh_equals_unsharded(two_devices):
    result = _result(two_devices["scan"])
    _assert_matches(result["first"])
    _assert_matches(result["continued"])  # final_state continues on the mesh
    assert result["stats_only_count_equal"] and result["stats_only_gap"] < FLOAT_TOL


@pytest.mark.slow
def test_minatar_bool_observations_on_mesh(two_devices):
    result = _result(two_devices["minatar"])
    assert result == {"dtypes": ["bool"], "equal": True, "split": True}


@pytest.mark.slow
def test_fused_rollout_per_shard_keeps_global_indices(two_devices):
    result = _result(two_devices["fused"])
    _assert_matches(result["first"])
    _assert_matches(result["continued"])
    assert result["stats_only_count_equal"] and result["stats_only_gap"] < FLOAT_TOL


@pytest.mark.slow
def test_other_mesh_axes_replicate_and_checks_name_the_global_environment(two_devices):
    _assert_matches(_result(_worker(["two_axes"], devices=4)["two_axes"]))
    message = _result(two_devices["checks"])
    assert "step 0, environment 5" in message, message


@pytest.mark.slow
def test_agents_on_two_devices_follow_one_device(two_devices):
    result = _result(two_devices["ppo"])
    assert result["env_state_split"] and result["episodes_equal"]
    assert max(result["loss_gap_per_update"]) < 1e-4, result
    assert result["weight_gap"] < 1e-4, result
    assert result["dqn_buffer_actions_equal"] and result["dqn_weight_gap"] < 1e-4, result


@pytest.mark.slow
def test_train_command_with_devices(two_devices):
    result = _result(two_devices["train"])
    assert np.isfinite(result["mean_return"])
    assert (two_devices["train_out"] / "checkpoint.msgpack").exists()


@pytest.mark.slow
def test_two_processes_on_loopback(tmp_path):
    with socket.socket() as s:  # a free port for the coordinator
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = os.path.join(HERE, "multihost_worker.py")
    outs = [tmp_path / f"process{i}.json" for i in range(2)]
    procs = [
        subprocess.Popen(
            [sys.executable, script, str(i), str(port), str(outs[i])],
            env=_env(2),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    for p in procs:
        try:
            log, _ = p.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        assert p.returncode == 0, log[-3000:]
    results = [json.loads(o.read_text()) for o in outs]
    for r in results:
        assert r["process_count"] == 2 and r["devices"] == 4 and not r["fully_addressable"]
        assert r["exact_equal"] and r["finished_equal"] and r["obs_gap"] < FLOAT_TOL, r
        assert r["stats_count"] == r["stats_count_alone"], r
        assert r["ppo_gap"] < 1e-4, r
    assert results[0]["ppo_digest"] == results[1]["ppo_digest"]  # the hosts agree bit for bit


# ----------------------------------------------------------------------------- bad input, here
class _FakeDevice:
    """Enough of a device for a Mesh and the checks that run before any work."""

    def __init__(self, id: int, platform: str = "cpu", process_index: int = 0):
        self.id, self.platform, self.process_index = id, platform, process_index

    def __repr__(self) -> str:
        return f"Fake{self.platform}({self.id})"


def _mesh(*devices, names=(jaxsim.ENV_AXIS,)) -> Mesh:
    return Mesh(np.array(devices, dtype=object), names)


ENV = jaxsim.make("CartPole-v1")


def test_mesh_must_be_a_mesh_with_the_env_axis():
    with pytest.raises(TypeError, match="jax.sharding.Mesh"):
        jaxsim.rollout(ENV, "random", 4, num_envs=4, mesh="envs")
    with pytest.raises(ValueError, match=r"axes \('batch',\).*'envs'"):
        jaxsim.rollout(ENV, "random", 4, num_envs=4, mesh=_mesh(*jax.devices(), names=("batch",)))


def test_batch_the_axis_or_process_count_does_not_divide():
    two = _mesh(_FakeDevice(0), _FakeDevice(1))
    with pytest.raises(ValueError, match="num_envs=5 is not divisible by the size 2"):
        jaxsim.rollout(ENV, "random", 4, num_envs=5, mesh=two)
    with pytest.raises(ValueError, match="num_envs=5 is not divisible by the size 2"):
        jaxsim.initial_state(ENV, jax.random.key(0), 5, mesh=two)
    hosts = _mesh(_FakeDevice(0), _FakeDevice(1, process_index=1), _FakeDevice(2))
    with pytest.raises(ValueError, match="num_envs=3 is not divisible by the 2 processes"):
        jaxsim.rollout(ENV, "random", 4, num_envs=3, mesh=hosts)
    with pytest.raises(ValueError, match="PPO num_envs: num_envs=3"):
        PPO(PPOConfig(num_envs=3, num_minibatches=1), ENV, mesh=two)


def test_devices_of_another_platform():
    mixed = _mesh(jax.devices()[0], _FakeDevice(1, "gpu"))
    with pytest.raises(ValueError, match=r"mixes devices of platforms \['cpu', 'gpu'\]"):
        jaxsim.rollout(ENV, "random", 4, num_envs=4, mesh=mixed)
    state = jax.device_put(jaxsim.initial_state(ENV, jax.random.key(0), 4), jax.devices()[0])
    gpu = _mesh(_FakeDevice(0, "gpu"))
    with pytest.raises(ValueError, match=r"state holds arrays on \['cpu'\] devices.*gpu"):
        jaxsim.rollout(ENV, "random", 4, state=state, mesh=gpu)


def test_train_devices_beyond_the_machine(capsys):
    with pytest.raises(SystemExit):
        train_main(["ppo", "--devices", str(jax.device_count() + 1), "--out", "unused"])
    err = capsys.readouterr().err
    assert "--devices (jax.devices(): " in err and f"got {jax.device_count() + 1}" in err
