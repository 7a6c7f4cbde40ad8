"""Stateful (recurrent) policies in `jaxsim.rollout`, and CartPole without velocities."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim

KEY = jax.random.key(0)


@dataclasses.dataclass(frozen=True)
class CountingPolicy:
    """Random CartPole actions; the carry counts the steps since the episode started."""

    def init_carry(self, num_envs):
        return {"count": jnp.zeros((num_envs,), jnp.int32)}

    def __call__(self, key, obs, carry):
        action = jax.random.bernoulli(key, 0.5, (obs.shape[0],)).astype(jnp.int32)
        return action, {"count": carry["count"]}, {"count": carry["count"] + 1}


@dataclasses.dataclass(frozen=True)
class SummingPolicy:
    """Deterministic Pendulum torques from the running sum of the observations (the carry)."""

    def init_carry(self, num_envs):
        return jnp.zeros((num_envs, 3), jnp.float32)

    def __call__(self, key, obs, carry):
        carry = carry + obs
        action = jnp.tanh(carry[:, 2:3] - carry[:, :1])
        return action, {"carry": carry}, carry


def test_carry_resets_where_episodes_end_and_continues_across_rollouts():
    # Random actions end episodes by termination, the limit of 15 by truncation.
    env = jaxsim.make("CartPole-v1", max_episode_steps=15)
    first = jaxsim.rollout(env, CountingPolicy(), 40, num_envs=6, key=KEY, backend="scan")
    second = jaxsim.rollout(env, CountingPolicy(), 25, state=first.final_state)
    assert first.terminated.any() and first.truncated.any()
    for out in (first, second):
        np.testing.assert_array_equal(out.extras["count"], out.episode_length - 1)
    np.testing.assert_array_equal(first.policy_carry["count"], 0)
    # The carry a continuation starts from is the previous rollout's final one: reset where done.
    np.testing.assert_array_equal(
        second.policy_carry["count"], first.final_state.policy_carry["count"]
    )
    np.testing.assert_array_equal(
        first.final_state.policy_carry["count"],
        np.where(first.done[-1], 0, first.episode_length[-1]),
    )


def test_continuation_equals_one_long_rollout():
    env = jaxsim.make("Pendulum-v1")  # no episode ends in 16 steps: the two runs step alike
    policy = SummingPolicy()
    whole = jaxsim.rollout(env, policy, 16, num_envs=3, key=KEY)
    first = jaxsim.rollout(env, policy, 7, num_envs=3, key=KEY)
    second = jaxsim.rollout(env, policy, 9, state=first.final_state)
    for name in ("obs", "action", "reward", "next_obs"):
        joined = np.concatenate([getattr(first, name), getattr(second, name)])
        np.testing.assert_array_equal(joined, getattr(whole, name))
    carries = np.concatenate([first.extras["carry"], second.extras["carry"]])
    np.testing.assert_array_equal(carries, whole.extras["carry"])
    np.testing.assert_array_equal(second.final_state.policy_carry, whole.final_state.policy_carry)
    np.testing.assert_array_equal(second.policy_carry, whole.extras["carry"][6])


def test_fused_refuses_a_stateful_policy_and_auto_runs_the_scan():
    env = jaxsim.make("CartPole-v1")
    with pytest.raises(ValueError, match="backend='fused' cannot run a stateful policy"):
        jaxsim.rollout(env, CountingPolicy(), 4, num_envs=2, backend="fused")
    with pytest.raises(ValueError, match="backend='fused' cannot run a stateful policy"):
        jaxsim.check_rollout(env, CountingPolicy(), 4, num_envs=2, backend="fused")
    auto = jaxsim.rollout(env, CountingPolicy(), 30, num_envs=2, key=KEY, backend="auto")
    scan = jaxsim.rollout(env, CountingPolicy(), 30, num_envs=2, key=KEY, backend="scan")
    for a, b in zip(jax.tree.leaves(auto), jax.tree.leaves(scan), strict=True):
        np.testing.assert_array_equal(a, b)


def test_stateless_policy_has_no_carry_and_refuses_a_stateful_state():
    env = jaxsim.make("CartPole-v1")
    out = jaxsim.rollout(env, "random", 3, num_envs=2)
    assert out.policy_carry is None and out.final_state.policy_carry is None
    stateful = jaxsim.rollout(env, CountingPolicy(), 3, num_envs=2).final_state
    with pytest.raises(ValueError, match="this policy is stateless"):
        jaxsim.rollout(env, "random", 3, state=stateful)
    bad = stateful.replace(policy_carry={"count": jnp.zeros((2,), jnp.float32)})
    with pytest.raises(ValueError, match="state.policy_carry is"):
        jaxsim.rollout(env, CountingPolicy(), 3, state=bad)


def test_stateful_policy_must_return_its_carry():
    class TwoOutputs(CountingPolicy):
        def __call__(self, key, obs, carry):
            return super().__call__(key, obs, carry)[:2]

    with pytest.raises(ValueError, match=r"must return \(action, extras, carry\)"):
        jaxsim.rollout(jaxsim.make("CartPole-v1"), TwoOutputs(), 2, num_envs=2)


# ------------------------------------------------------------------- CartPole without velocities
def test_velocity_hidden_cartpole_observes_the_positions_of_the_full_one():
    full = jaxsim.make("CartPole-v1")
    hidden = jaxsim.make("CartPole-NoVel-v1")
    assert hidden.config.hide_velocity and hidden.observation_space(
        hidden.default_params
    ).shape == (2,)
    assert jaxsim.make("CartPole-v1", hide_velocity=True).config == hidden.config
    assert hash(full) != hash(jaxsim.make("CartPole-v1", hide_velocity=True))
    actions = jax.random.bernoulli(KEY, 0.5, (80, 5)).astype(jnp.int32)
    policy = jaxsim.OpenLoopPolicy(actions)
    a = jaxsim.rollout(full, policy, 80, num_envs=5, key=KEY)
    b = jaxsim.rollout(hidden, policy, 80, num_envs=5, key=KEY)
    assert a.done.any()  # resets included
    for name in ("obs", "next_obs"):
        np.testing.assert_array_equal(getattr(b, name), getattr(a, name)[..., [0, 2]])
    for name in ("reward", "terminated", "truncated", "episode_length"):
        np.testing.assert_array_equal(getattr(b, name), getattr(a, name))
    # jaxsim.check_env passes for it: tests/jaxsim/test_check_env.py checks every native id.
