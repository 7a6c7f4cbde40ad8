"""Counter-based randomness: determinism, range, uniformity and independence."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsim import rng

SEED = rng.seed_from_key(jax.random.key(7))


def test_pure_function_of_its_inputs():
    a = rng.bits(SEED, jnp.arange(100), 5, 3)
    b = rng.bits(SEED, jnp.arange(100), 5, 3)
    assert a.dtype == jnp.uint32
    np.testing.assert_array_equal(a, b)
    # The split form (hoisted stream key) is the same function.
    k = rng.stream_key(SEED, jnp.arange(100), 3)
    np.testing.assert_array_equal(a, rng.bits_from_stream_key(k, 5))


def test_other_seed_gives_other_numbers():
    other = rng.seed_from_key(jax.random.key(8))
    a = rng.bits(SEED, jnp.arange(1000), 0, 0)
    b = rng.bits(other, jnp.arange(1000), 0, 0)
    assert np.mean(np.asarray(a) == np.asarray(b)) < 0.01


def test_mix_is_a_bijection_on_a_sample():
    x = jnp.arange(1 << 16, dtype=jnp.uint32) * np.uint32(65537)
    assert len(np.unique(np.asarray(rng.mix(x)))) == 1 << 16


def _chi2_uniform(u, bins=64):
    counts, _ = np.histogram(np.asarray(u), bins=bins, range=(0.0, 1.0))
    expected = len(u) / bins
    return ((counts - expected) ** 2 / expected).sum()


@pytest.mark.parametrize("axis", ["index", "counter", "stream"])
def test_uniform_along_each_input(axis):
    n = 1 << 16
    i = jnp.arange(n, dtype=jnp.uint32)
    args = {"index": (i, 3, 1), "counter": (3, i, 1), "stream": (3, 1, i)}[axis]
    u = rng.uniform(SEED, *args)
    assert u.dtype == jnp.float32
    assert float(u.min()) >= 0.0 and float(u.max()) < 1.0
    # 63 degrees of freedom: the 99.99th percentile of chi2(63) is about 115.
    assert _chi2_uniform(u) < 115
    assert abs(float(u.mean()) - 0.5) < 0.005


@pytest.mark.parametrize(
    "neighbour",
    [
        lambda i: (i + 1, 0, 0),  # adjacent environments
        lambda i: (i, 1, 0),  # next step
        lambda i: (i, 0, 1),  # next stream
    ],
    ids=["index", "counter", "stream"],
)
def test_neighbours_are_uncorrelated(neighbour):
    i = jnp.arange(1 << 16, dtype=jnp.uint32)
    a = np.asarray(rng.uniform(SEED, i, 0, 0))
    b = np.asarray(rng.uniform(SEED, *neighbour(i)))
    # |r| of independent samples of this size is below 4 / sqrt(n) with overwhelming odds.
    assert abs(np.corrcoef(a, b)[0, 1]) < 4 / np.sqrt(len(a))
    # Bits, not just means: the xor of the two draws has each bit set half of the time.
    x = np.asarray(rng.bits(SEED, i, 0, 0)) ^ np.asarray(rng.bits(SEED, *neighbour(i)))
    bit_freq = ((x[:, None] >> np.arange(32, dtype=np.uint32)) & 1).mean(0)
    assert np.all(np.abs(bit_freq - 0.5) < 0.02)


def test_randint_covers_its_range_evenly():
    r = np.asarray(rng.randint(SEED, jnp.arange(60000), 0, 0, 3))
    assert r.dtype == np.int32 and r.min() == 0 and r.max() == 2
    np.testing.assert_allclose(np.bincount(r) / len(r), 1 / 3, atol=0.01)


def test_normal_moments():
    z = np.asarray(rng.normal(SEED, jnp.arange(1 << 16), 0, 10))
    assert np.isfinite(z).all()
    assert abs(z.mean()) < 0.02 and abs(z.std() - 1) < 0.02
    assert abs((z**3).mean()) < 0.05 and abs((z**4).mean() - 3) < 0.15


def test_works_under_jit_and_vmap():
    f = jax.jit(jax.vmap(lambda i: rng.uniform(SEED, i, 2, 4)))
    i = jnp.arange(10, dtype=jnp.uint32)
    np.testing.assert_array_equal(f(i), rng.uniform(SEED, i, 2, 4))


def test_to_randint_truncates_as_floor_would_for_every_uniform():
    """Issue 41: `to_randint` converts without `floor` (which Mosaic GPU lacks); for each of
    the 2**24 values `to_uniform` gives and a spread of n, it equals the floor formula."""
    b = jnp.arange(2**24, dtype=jnp.uint32) << 8

    @jax.jit
    def mismatches(n):
        floor = jnp.floor(rng.to_uniform(b) * n).astype(jnp.int32)
        return jnp.sum(rng.to_randint(b, n) != jnp.minimum(floor, n - 1))

    for n in (1, 3, 6, 10, 160, 2**20 + 7):
        assert int(mismatches(jnp.int32(n))) == 0, n
