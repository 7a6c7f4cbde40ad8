"""The agents' losses and normalizers, each against a hand or Python-loop computation."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from agents import losses, normalizers


# ------------------------------------------------------------------------------------- losses
def _gae_loop(reward, value, next_value, terminated, truncated, gamma, lam):
    T, B = reward.shape
    adv = np.zeros((T, B))
    for b in range(B):
        running = 0.0
        for t in reversed(range(T)):
            if terminated[t, b]:
                bootstrap = 0.0
            else:  # truncated or still running: the true next observation's value
                bootstrap = next_value[t, b]
            if terminated[t, b] or truncated[t, b]:
                running = 0.0  # the next step belongs to another episode
            delta = reward[t, b] + gamma * bootstrap - value[t, b]
            running = delta + gamma * lam * running
            adv[t, b] = running
    return adv


def test_gae_matches_python_loop_with_terminations_and_truncations():
    rng = np.random.default_rng(0)
    T, B = 13, 5
    reward = rng.normal(size=(T, B)).astype(np.float32)
    value = rng.normal(size=(T, B)).astype(np.float32)
    next_value = rng.normal(size=(T, B)).astype(np.float32)
    terminated = rng.random((T, B)) < 0.15
    truncated = rng.random((T, B)) < 0.15
    terminated[4, 0] = truncated[4, 0] = True  # both at once: no bootstrap
    truncated[T - 1, 1], terminated[T - 1, 1] = True, False
    assert (terminated & ~truncated).any() and (truncated & ~terminated).any()
    adv, target = losses.gae(
        jnp.asarray(reward),
        jnp.asarray(value),
        jnp.asarray(next_value),
        jnp.asarray(terminated),
        jnp.asarray(truncated),
        0.97,
        0.9,
    )
    expected = _gae_loop(reward, value, next_value, terminated, truncated, 0.97, 0.9)
    np.testing.assert_allclose(adv, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(target, expected + value, rtol=1e-5, atol=1e-5)
    # Where an episode ends, the advantage sees next_value on truncation and ignores it on
    # termination: bump next_value everywhere and compare.
    gamma = 0.97
    bumped, _ = losses.gae(
        jnp.asarray(reward),
        jnp.asarray(value),
        jnp.asarray(next_value + 1.0),
        jnp.asarray(terminated),
        jnp.asarray(truncated),
        gamma,
        0.9,
    )
    change = np.asarray(bumped) - np.asarray(adv)
    np.testing.assert_allclose(change[terminated], 0.0, atol=1e-5)
    np.testing.assert_allclose(change[truncated & ~terminated], gamma, rtol=1e-4)


def test_clipped_policy_loss_hand_computed():
    ratio = np.array([1.5, 0.5, 1.0, 1.1], np.float32)
    advantage = jnp.array([1.0, -1.0, 2.0, -2.0])
    old = jnp.array([-1.0, -0.3, -2.0, -0.7])
    new = old + jnp.log(ratio)
    loss, approx_kl, clip_fraction = losses.clipped_policy_loss(new, old, advantage, 0.2)
    # min(r A, clip(r) A): 1.2, -0.8, 2.0, -2.2 -> mean 0.05, loss -0.05
    np.testing.assert_allclose(loss, -0.05, atol=1e-6)
    np.testing.assert_allclose(clip_fraction, 0.5)
    expected_kl = np.mean((ratio - 1) - np.log(ratio))
    np.testing.assert_allclose(approx_kl, expected_kl, rtol=1e-5)


def test_value_loss_hand_computed():
    value, old, target = jnp.array([1.0, 0.0]), jnp.array([0.0, 0.0]), jnp.array([2.0, 1.0])
    np.testing.assert_allclose(losses.value_loss(value, old, target, None), 0.5 * (1 + 1) / 2)
    # Clipped: value 1 moves to 0.2, error (0.2-2)^2 = 3.24 > 1; second 1 either way.
    np.testing.assert_allclose(losses.value_loss(value, old, target, 0.2), 0.5 * (3.24 + 1) / 2)


def test_running_stats_match_numpy():
    rng = np.random.default_rng(1)
    chunks = [rng.normal(3.0, 2.0, size=(n, 3)).astype(np.float32) for n in (5, 17, 40)]
    norm = normalizers.observation_normalizer((3,))
    stats = norm.init()
    for c in chunks:
        stats = norm.update(stats, jnp.asarray(c))
    data = np.concatenate(chunks)
    np.testing.assert_allclose(stats.mean, data.mean(0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(stats.var, data.var(0), rtol=1e-3)


def test_reward_scaler_divides_by_return_std():
    scaler = normalizers.reward_scaler(num_envs=2, gamma=0.9)
    reward = jnp.ones((6, 2))
    done = jnp.zeros((6, 2), bool).at[2, 0].set(True)
    state, scaled = scaler.update(scaler.init(), reward, done)
    np.testing.assert_allclose(scaled * normalizers.standard_deviation(state.stats), reward)
    # Env 0's running return restarted after step 2: three steps since, 1 + 0.9 + 0.81.
    np.testing.assert_allclose(state.returns, [2.71, (1 - 0.9**6) / 0.1], rtol=1e-5)
