"""backend="auto": the fused kernel compiled once per configuration, else the scan, one warning."""

import warnings

import jax
import numpy as np
import pytest

import jaxsim
import jaxsim.fused
from jaxsim.fused import compile_once

KEY = jax.random.key(11)
CONFIG = jaxsim.FusedConfig(block_envs=4, steps_per_launch=2)


@pytest.fixture
def kernel_chosen(monkeypatch):
    """`auto` picks the kernel as on a GPU; outcomes are forgotten between tests."""
    monkeypatch.setattr(jaxsim.fused, "auto_backend", lambda env, policy: "fused")
    monkeypatch.setattr(compile_once, "_OUTCOMES", {})


def _compiles(monkeypatch, fail: bool) -> list:
    tries = []

    def compile_(lowered):
        tries.append(lowered)
        if fail:
            raise RuntimeError("Triton lowering: simulated failure")
        return lowered.compile()

    monkeypatch.setattr(compile_once, "_compile", compile_)
    return tries


def test_a_kernel_that_fails_to_compile_falls_back_to_the_scan_with_one_warning(
    kernel_chosen, monkeypatch
):
    tries = _compiles(monkeypatch, fail=True)
    env = jaxsim.make("CartPole-v1")
    kw = dict(num_envs=4, key=KEY, fused_config=CONFIG)
    with pytest.warns(RuntimeWarning, match=r"backend='auto' runs the scan.*simulated failure"):
        out = jaxsim.rollout(env, "random", 5, **kw)
    scan = jaxsim.rollout(env, "random", 5, backend="scan", **kw)
    np.testing.assert_array_equal(out.obs, scan.obs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same configuration: no second warning, no retry
        jaxsim.rollout(env, "random", 5, **kw)
    assert len(tries) == 1


def test_explicit_fused_raises_what_auto_survives(kernel_chosen, monkeypatch):
    env = jaxsim.make("CartPole-v1")
    kw = dict(num_envs=4, key=KEY, fused_config=CONFIG)

    from jaxsim.fused import driver

    monkeypatch.setattr(driver, "rollout_jit", _Broken())
    with pytest.raises(RuntimeError, match="Mosaic: simulated failure"):
        jaxsim.rollout(env, "random", 5, backend="fused", **kw)
    with pytest.warns(RuntimeWarning, match=r"fused kernel failed to compile for CartPole-v1"):
        jaxsim.rollout(env, "random", 5, **kw)


class _Broken:
    """A jitted rollout whose lowering (and so its compile and its call) fails."""

    def lower(self, *args):
        raise RuntimeError("Mosaic: simulated failure")

    def __call__(self, *args):
        self.lower()


def test_a_kernel_that_compiles_runs_and_is_compiled_once(kernel_chosen, monkeypatch):
    tries = _compiles(monkeypatch, fail=False)
    env = jaxsim.make("Pendulum-v1")
    kw = dict(num_envs=4, key=KEY, fused_config=CONFIG)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        auto = jaxsim.rollout(env, "random", 4, **kw)
        jaxsim.rollout(env, "random", 4, key=jax.random.key(1), num_envs=4, fused_config=CONFIG)
    fused = jaxsim.rollout(env, "random", 4, backend="fused", **kw)
    np.testing.assert_array_equal(auto.obs, fused.obs)
    assert len(tries) == 1  # a new key is the same configuration
