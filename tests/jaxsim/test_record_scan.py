"""`record_scan` against `lax.scan`, and the scan backend's rollout against a `lax.scan` one."""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim
from jaxsim.rollout.scan import record_scan

scan_module = sys.modules["jaxsim.rollout.scan"]


def _body(carry, x):
    """Mixed dtypes and shapes, two outputs of each (shape, dtype) pair, nested, one PRNG key."""
    t, scale = x
    carry = carry * scale + jnp.sin(carry) + t.astype(jnp.float32)
    y = {
        "a": carry,
        "b": carry * 2.0,
        "pair": (carry > 1.0, carry < 0.5),
        "i": (carry * 10).astype(jnp.int32),
        "j": jnp.stack([carry.astype(jnp.int32), -carry.astype(jnp.int32)], -1),
        "small": jnp.int8(3) * t.astype(jnp.int8),
        "key": jax.random.fold_in(jax.random.key(0), t),
    }
    return carry, y


@pytest.mark.parametrize("n", [1, 7])
def test_record_scan_equals_lax_scan(n):
    carry = jnp.linspace(-1.0, 1.0, 6, dtype=jnp.float32)
    xs = (jnp.arange(n, dtype=jnp.int32), jnp.linspace(0.5, 0.9, n, dtype=jnp.float32))
    want = jax.jit(lambda c, xs: jax.lax.scan(_body, c, xs))(carry, xs)
    got = jax.jit(lambda c, xs: record_scan(_body, c, xs))(carry, xs)
    want_key, got_key = want[1].pop("key"), got[1].pop("key")
    np.testing.assert_array_equal(jax.random.key_data(got_key), jax.random.key_data(want_key))
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def test_record_scan_writes_into_the_given_buffers_and_starts_none_fresh():
    carry = jnp.linspace(-1.0, 1.0, 6, dtype=jnp.float32)
    xs = (jnp.arange(5, dtype=jnp.int32), jnp.linspace(0.5, 0.9, 5, dtype=jnp.float32))

    def body(c, x):
        c, y = _body(c, x)
        return c, {name: y[name] for name in ("a", "b", "i", "j", "small")}

    _, want = jax.jit(lambda c, xs: jax.lax.scan(body, c, xs))(carry, xs)
    into = {name: jnp.zeros(w.shape, w.dtype) for name, w in want.items()}
    into["small"] = None  # no buffer given: this one starts fresh
    pointers = {k: v.unsafe_buffer_pointer() for k, v in into.items() if v is not None}
    run = jax.jit(lambda c, xs, into: record_scan(body, c, xs, into=into), donate_argnums=2)
    _, got = run(carry, xs, into)
    for name, w in want.items():
        np.testing.assert_array_equal(got[name], w, err_msg=name)
    for name, pointer in pointers.items():
        assert got[name].unsafe_buffer_pointer() == pointer, f"{name} was not written in place"


def test_record_scan_rejects_ragged_xs():
    with pytest.raises(ValueError, match="one leading length"):
        record_scan(_body, jnp.zeros(3), (jnp.arange(4), jnp.ones(5)))


def _lax_scan_backend(body, carry, xs, place=None, into=None):
    """The scan backend as it was: `lax.scan`'s own output buffers (no out=)."""
    assert into is None
    carry, ys = jax.lax.scan(body, carry, xs)
    return carry, ys if place is None else place(ys)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_rollout_equals_lax_scan_rollout(monkeypatch, env_id):
    """Every field, bit for bit, over a run with many auto-resets; n not a round number."""
    env = jaxsim.make(env_id)
    kwargs = dict(num_envs=16, key=jax.random.key(5), backend="scan", outputs="all")
    got = jaxsim.rollout(env, "random", 203, **kwargs)
    monkeypatch.setattr(scan_module, "record_scan", _lax_scan_backend)
    jax.clear_caches()
    want = jaxsim.rollout(env, "random", 203, **kwargs)
    jax.clear_caches()
    assert int(np.asarray(want.done).sum()) > 5  # the run crosses episode ends
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(g, w)


def test_rollout_copies_no_output_buffer():
    """The reason `record_scan` exists: no [n, num_envs, ...] buffer is copied before the loop."""
    env = jaxsim.make("CartPole-v1")
    n, num_envs = 24, 8

    def run(key):
        return jaxsim.rollout(env, "random", n, num_envs=num_envs, key=key, backend="scan")

    hlo = jax.jit(run).lower(jax.random.key(0)).compile().as_text()
    copies = [line for line in hlo.splitlines() if f"[{n},{num_envs}" in line and " copy(" in line]
    assert not copies, copies
