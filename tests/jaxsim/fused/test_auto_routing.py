"""backend="auto" on a GPU: the kernel only for families the sm_90 compile record shows fast.

`jax.default_backend` is patched to "gpu": the routing reads the record, never a device.
"""

import json
import logging
from pathlib import Path

import jax
import numpy as np
import pytest

import jaxsim
from benchmarks.gpu import compile_table
from jaxsim.fused import auto_backend, compile_record
from jaxsim.fused.config import auto_reason

REPO = Path(__file__).resolve().parents[3]
KEY = jax.random.key(0)


@pytest.fixture
def on_gpu(monkeypatch):
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    monkeypatch.setattr(jaxsim.fused.config, "_LOGGED", set())


def mlp(env, hidden):
    """`init_mlp_policy`'s network with zero weights: routing reads its widths, never a weight,
    and its shapes come from `jax.eval_shape`, so nothing is compiled to make it (eagerly, its
    orthogonal initialisation compiled ~20 programs per network)."""
    shapes = jax.eval_shape(lambda key: jaxsim.init_mlp_policy(key, env, hidden=hidden), KEY)
    return jax.tree.map(lambda x: jax.device_put(np.zeros(x.shape, x.dtype)), shapes)


@pytest.mark.parametrize(
    "env_id", ["CartPole-v1", "Pendulum-v1", "Acrobot-v1", "MinAtar/Breakout-v0"]
)
def test_random_actions_of_a_fast_family_run_the_kernel(on_gpu, env_id):
    env = jaxsim.make(env_id)
    assert auto_reason(env, jaxsim.random_policy(env)) is None
    assert auto_backend(env, jaxsim.random_policy(env)) == "fused"


def test_mlps_run_the_kernel_at_the_block_size_their_record_chose(on_gpu):
    """Issue 41: the 64x64 MLP spills at 256 environments and 4 warps; its family's default
    is a configuration measured without spills, and auto runs the kernel there."""
    env = jaxsim.make("CartPole-v1")
    assert auto_backend(env, mlp(env, (12, 16))) == "fused"  # judged as the 16x16 measured
    big = mlp(env, (64, 64))
    assert auto_backend(env, big) == "fused"
    m = compile_record.measured(env, big)
    assert m.meets_targets("CartPole-v1") and m.spill_bytes == 0
    assert (m.block_envs, m.num_warps) != compile_record.DEFAULT_TUNING
    config = jaxsim.FusedConfig.for_family(env, big)
    assert (config.block_envs, config.num_warps) == (m.block_envs, m.num_warps)
    assert config.steps_per_launch == jaxsim.FusedConfig().steps_per_launch
    random = jaxsim.FusedConfig.for_family(env, jaxsim.random_policy(env))
    assert random == jaxsim.FusedConfig()  # fast at the defaults: kept


def test_a_family_that_spills_everywhere_runs_the_scan_and_says_why(on_gpu):
    env = jaxsim.make("Swarm-v0", num_particles=1024)
    reason = auto_reason(env, jaxsim.random_policy(env))
    assert "Swarm-v0(num_particles=1024)" in reason and "targets: 20 CPU-s, no spills" in reason
    assert auto_backend(env, jaxsim.random_policy(env)) == "scan"


def test_a_family_that_does_not_compile_in_time_runs_the_scan_and_says_why(on_gpu, caplog):
    env = jaxsim.make("MinAtar/Breakout-v0")
    policy = mlp(env, (64, 64))
    assert "did not compile within" in auto_reason(env, policy)
    with caplog.at_level(logging.INFO, logger="jaxsim.fused"):
        assert auto_backend(env, policy) == "scan"
        assert auto_backend(env, policy) == "scan"
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 1 and "backend='auto' runs the scan: MinAtar/Breakout-v0" in logged[0]


def test_a_default_that_fails_to_compile_is_replaced_by_one_that_compiles(on_gpu):
    env = jaxsim.make("Swarm-v0", num_particles=16)
    policy = jaxsim.random_policy(env)
    assert auto_backend(env, policy) == "fused"
    assert jaxsim.FusedConfig.for_family(env, policy).block_envs < 256  # 256 fails in Triton


def test_what_was_never_measured_runs_the_scan(on_gpu):
    env = jaxsim.make("MinAtar/Breakout-v1")  # the minimal action set: not in the record
    assert auto_reason(env, jaxsim.random_policy(env)).startswith("no compile record for")
    cartpole = jaxsim.make("CartPole-v1")
    assert "no compile record" in auto_reason(cartpole, mlp(cartpole, (128, 64)))
    assert "no compile record" in auto_reason(cartpole, mlp(cartpole, (16, 16, 16)))


def test_off_a_gpu_auto_runs_the_scan_and_says_so():
    if jax.default_backend() == "gpu":
        pytest.skip("a GPU is present")
    env = jaxsim.make("CartPole-v1")
    assert "not a GPU" in auto_reason(env, jaxsim.random_policy(env))


def test_the_table_is_the_records():
    """compile_record.MEASURED is what `hopper_compile --table` derives from the record it
    names: per family, the measured configuration meeting the targets, else the defaults."""
    record = json.loads((REPO / compile_record.RECORD).read_text())
    assert compile_table.measured_rows([record]) == compile_record.MEASURED
    defaults = jaxsim.FusedConfig()
    assert compile_record.DEFAULT_TUNING == (defaults.block_envs, defaults.num_warps)
    for (family, _, _), m in compile_record.MEASURED.items():
        if (m.block_envs, m.num_warps) != compile_record.DEFAULT_TUNING:
            assert m.meets_targets(family), family  # a non-default only where it is fast
