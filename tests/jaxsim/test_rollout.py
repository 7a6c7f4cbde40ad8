"""jaxsim.rollout: auto-reset semantics, continuation, determinism, no retrace, bad input."""

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim
from jaxsim import rng
from jaxsim.core import TimeStep, env_transition, stack_obs
from jaxsim.rng import ResetDraws

KEY = jax.random.key(42)
# MinAtar's -v0 and -v1 ids differ only in their action set, which test_minatar.py covers:
# one id per game here keeps these per-environment tests' compiles down.
IDS = [i for i in jaxsim.registered_ids() if not (i.startswith("MinAtar/") and i.endswith("-v0"))]


def _keys(key):
    """The rollout's documented key schedule: (reset seed, policy key, dynamics key)."""
    k_reset, k_policy, k_step = jax.random.split(key, 3)
    return rng.seed_from_key(k_reset), k_policy, k_step


def python_loop(env, policy, n, num_envs, key):
    """The reference: env.step one environment at a time, auto-reset by hand, same randomness.

    Stochastic dynamics (gymnax adapters) get step t's keys split from the dynamics key;
    dynamics that take step uniforms (MinAtar) environment i's draw at counter t + 1, through
    the transition `env.step` wraps (`env.step` itself draws them from its key).
    """
    params = env.default_params
    seed, k_policy, k_step = _keys(key)
    step = jax.jit(env.step)
    if env.step_uniform_shapes():

        @jax.jit
        def step(index_and_counter, state, action, params):
            index, counter = index_and_counter
            u = ResetDraws.make(env, seed, index).step_draw(counter)
            state, fields, reward, term, trunc = env_transition(env, state, action, params, None, u)
            return state, TimeStep(stack_obs(env, fields), reward, term, trunc)

    reset_at = jax.jit(env.reset_at)
    states, obs = [], []
    for i in range(num_envs):
        s, o = reset_at(seed, jnp.uint32(i), jnp.uint32(0), params)
        states.append(s)
        obs.append(o)
    out = {k: [] for k in ("obs", "action", "reward", "terminated", "truncated", "next_obs")}
    for t in range(n):
        actions = policy(jax.random.fold_in(k_policy, t), jnp.stack(obs))
        out["obs"].append(np.stack(obs))
        out["action"].append(np.asarray(actions))
        row = {k: [] for k in ("reward", "terminated", "truncated", "next_obs")}
        step_keys = jax.random.split(jax.random.fold_in(k_step, t), num_envs)
        for i in range(num_envs):
            k = (jnp.uint32(i), jnp.uint32(t + 1)) if env.step_uniform_shapes() else step_keys[i]
            s, ts = step(k, states[i], actions[i], params)
            row["reward"].append(ts.reward)
            row["terminated"].append(ts.terminated)
            row["truncated"].append(ts.truncated)
            row["next_obs"].append(ts.obs)
            if ts.terminated or ts.truncated:
                s, o = reset_at(seed, jnp.uint32(i), jnp.uint32(t + 1), params)
            else:
                o = ts.obs
            states[i], obs[i] = s, o
        for k, v in row.items():
            out[k].append(np.stack(v))
    return {k: np.stack(v) for k, v in out.items()}


@pytest.mark.parametrize("env_id", IDS)
def test_scan_equals_a_python_loop_over_env_step(env_id):
    env = jaxsim.make(env_id, max_episode_steps=9)  # short episodes: several resets
    policy = jaxsim.random_policy(env)
    n, num_envs = 23, 3
    ref = python_loop(env, policy, n, num_envs, KEY)
    out = jaxsim.rollout(env, policy, n, num_envs=num_envs, key=KEY)
    for name, expected in ref.items():
        got = np.asarray(getattr(out, name))
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(got, expected, err_msg=name)
    assert out.done.any()


def test_same_step_auto_reset_and_next_obs():
    env = jaxsim.make("CartPole-v1", max_episode_steps=30)
    params = env.default_params
    n, num_envs = 120, 8
    out = jaxsim.rollout(env, "random", n, num_envs=num_envs, key=KEY)
    done = np.asarray(out.done)
    obs, next_obs = np.asarray(out.obs), np.asarray(out.next_obs)
    assert out.terminated.any() and out.truncated.any()
    # Without an episode end, the next observation is the next step's observation.
    np.testing.assert_array_equal(obs[1:][~done[:-1]], next_obs[:-1][~done[:-1]])
    # Where an episode ends, obs[t + 1] is the counter-based reset for (env, t + 1).
    seed, _, _ = _keys(KEY)
    reset_at = jax.jit(env.reset_at)
    for t, i in zip(*np.nonzero(done[:-1]), strict=True):
        _, reset_obs = reset_at(seed, jnp.uint32(i), jnp.uint32(t + 1), params)
        np.testing.assert_allclose(obs[t + 1, i], reset_obs, rtol=1e-6, atol=1e-7)
        assert not np.array_equal(obs[t + 1, i], next_obs[t, i])
    # On terminated steps next_obs is the terminal observation: outside the allowed region.
    term = np.asarray(out.terminated)
    x, theta = next_obs[..., 0][term], next_obs[..., 2][term]
    assert np.all(
        (np.abs(x) > params.x_threshold) | (np.abs(theta) > params.theta_threshold_radians)
    )
    # On truncated steps the episode has run exactly max_episode_steps.
    np.testing.assert_array_equal(np.asarray(out.episode_length)[np.asarray(out.truncated)], 30)


def test_chained_rollouts_continue_the_same_episodes():
    env = jaxsim.make("Pendulum-v1", max_episode_steps=25)
    n1, n2, num_envs = 17, 40, 4
    first = jaxsim.rollout(env, "random", n1, num_envs=num_envs, key=KEY)
    second = jaxsim.rollout(env, "random", n2, key=jax.random.key(1), state=first.final_state)
    assert second.obs.shape[1] == num_envs
    np.testing.assert_array_equal(second.obs[0], first.final_state.obs)
    np.testing.assert_array_equal(second.obs[0], first.next_obs[-1])  # no episode ended at n1
    # Step counts and returns carry across the boundary: first episodes end at step 25 overall.
    reward = np.concatenate([first.reward, second.reward])
    length = np.concatenate([first.episode_length, second.episode_length])
    ret = np.concatenate([first.episode_return, second.episode_return])
    done = np.concatenate([first.done, second.done])
    assert done[24].all() and not done[:24].any()
    np.testing.assert_array_equal(length[24], 25)
    np.testing.assert_allclose(ret[24], reward[:25].sum(0), rtol=1e-5)
    np.testing.assert_array_equal(second.final_state.env_state.time, (n1 + n2) % 25)


def test_same_key_same_output_other_key_other_output():
    # Sizes of test_random_policy_covers_the_action_space's Acrobot run: one program for both.
    env = jaxsim.make("Acrobot-v1")
    a = jaxsim.rollout(env, "random", 50, num_envs=20, key=KEY)
    b = jaxsim.rollout(env, "random", 50, num_envs=20, key=KEY)
    c = jaxsim.rollout(env, "random", 50, num_envs=20, key=jax.random.key(43))
    jax.tree.map(np.testing.assert_array_equal, a, b)
    assert not np.array_equal(a.action, c.action)


def test_second_call_with_new_key_or_weights_does_not_retrace(caplog):
    env = jaxsim.make("CartPole-v1")
    traces = []

    def policy(key, obs):
        traces.append(obs.shape)
        return jax.random.randint(key, obs.shape[:1], 0, 2, jnp.int32)

    jaxsim.rollout(env, policy, 10, num_envs=3, key=jax.random.key(0))
    jaxsim.rollout(env, policy, 10, num_envs=3, key=jax.random.key(1))
    assert len(traces) == 1
    jaxsim.rollout(env, policy, 10, num_envs=4, key=jax.random.key(1))
    assert len(traces) == 2  # a new batch size is a new program

    # Weights are arguments, not constants: new weights reuse the compiled rollout.
    mlp = jaxsim.init_mlp_policy(jax.random.key(0), env)
    jax.block_until_ready(jaxsim.rollout(env, mlp, 10, num_envs=3))
    heavier = mlp.replace(actor=jax.tree.map(lambda w: 2 * w, mlp.actor))
    with jax.log_compiles(), caplog.at_level(logging.WARNING, logger="jax"):
        jax.block_until_ready(jaxsim.rollout(env, heavier, 10, num_envs=3, key=KEY))
    compiles = [r for r in caplog.records if r.getMessage().startswith("Compiling")]
    assert compiles == []


def test_policy_extras_are_recorded():
    env = jaxsim.make("Pendulum-v1")
    mlp = jaxsim.init_mlp_policy(jax.random.key(0), env)
    out = jaxsim.rollout(env, mlp, 12, num_envs=5, key=KEY)
    assert out.extras["log_prob"].shape == (12, 5) and out.extras["value"].shape == (12, 5)
    log_prob, _, value = mlp.evaluate(out.obs, out.action)
    np.testing.assert_allclose(out.extras["log_prob"], log_prob, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.extras["value"], value, rtol=1e-5, atol=1e-6)


def test_random_policy_covers_the_action_space():
    disc = jaxsim.rollout(jaxsim.make("Acrobot-v1"), "random", 50, num_envs=20, key=KEY)
    np.testing.assert_allclose(np.bincount(np.ravel(disc.action)) / 1000, 1 / 3, atol=0.05)
    env = jaxsim.make("Pendulum-v1")
    box = jaxsim.rollout(env, "random", 50, num_envs=20, key=KEY).action
    assert box.shape == (50, 20, 1) and box.dtype == jnp.float32
    assert float(box.min()) >= -2.0 and float(box.max()) <= 2.0 and float(box.std()) > 0.9


def test_episode_statistics():
    env = jaxsim.make("CartPole-v1")
    out = jaxsim.rollout(env, "random", 200, num_envs=16, key=KEY)
    returns, lengths = out.finished_episodes()
    stats = out.episode_stats()
    assert int(stats.count) == len(returns) > 50
    np.testing.assert_allclose(stats.mean_return, returns.mean(), rtol=1e-5)
    np.testing.assert_allclose(stats.std_return, returns.std(), rtol=1e-4)
    np.testing.assert_allclose(stats.mean_length, lengths.mean(), rtol=1e-5)
    np.testing.assert_array_equal(returns, lengths)  # CartPole pays 1 per step
    assert 15 < returns.mean() < 30  # random CartPole lasts ~22 steps


def test_rollout_runs_inside_jit():
    env = jaxsim.make("MountainCar-v0")

    @jax.jit
    def total_reward(key):
        return jaxsim.rollout(env, "random", 10, num_envs=3, key=key).reward.sum()

    assert float(total_reward(KEY)) == -30.0


def test_a_batched_env_state_is_accepted_as_state():
    env = jaxsim.make("CartPole-v1")
    reset = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))  # jitted: one compile, not one per op
    state, _ = reset(jax.random.split(KEY, 6), env.default_params)
    out = jaxsim.rollout(env, "random", 5, key=KEY, state=state)
    assert out.obs.shape == (5, 6, 4)
    np.testing.assert_allclose(
        out.obs[0], jax.jit(jax.vmap(env.observe, (0, None)))(state, env.default_params)
    )


# --------------------------------------------------------------------------------------- bad input
ENV = jaxsim.make("CartPole-v1")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(n=0), ValueError, r"n must be an integer in \[1, 2\*\*31 - 1\].*got 0"),
        (dict(n=2.5), ValueError, r"n must be an integer in .*got 2.5"),
        (dict(num_envs=0), ValueError, r"num_envs must be an integer in .*got 0"),
        (dict(backend="gpu"), ValueError, r"unknown backend 'gpu'; valid backends are"),
        (
            dict(params=jaxsim.make("Pendulum-v1").default_params),
            TypeError,
            r"params must be CartPoleParams for CartPole-v1.*got PendulumParams",
        ),
        (dict(key=jnp.zeros(3, jnp.uint32)), ValueError, r"key must be one PRNG key"),
        (dict(policy="greedy"), ValueError, r"only named policy is 'random', got 'greedy'"),
        (dict(policy=3), TypeError, r"policy must be callable, got int"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, match):
    args = dict(env=ENV, policy="random", n=5, num_envs=2) | kwargs
    env, policy, n = args.pop("env"), args.pop("policy"), args.pop("n")
    with pytest.raises(error, match=match):
        jaxsim.rollout(env, policy, n, **args)


def test_non_env_is_rejected():
    with pytest.raises(TypeError, match="env must be a jaxsim.Env"):
        jaxsim.rollout("CartPole-v1", "random", 5)


@pytest.mark.parametrize(
    ("policy", "match"),
    [
        (lambda k, o: jnp.zeros((o.shape[0], 1), jnp.int32), r"shape \(4, 1\).*needs shape \(4,\)"),
        (lambda k, o: jnp.zeros((o.shape[0],), jnp.float32), r"dtype float32.*dtype int32"),
        (lambda k, o: jnp.zeros((), jnp.int32), r"shape \(\).*needs shape \(4,\)"),
        (lambda k, o: (jnp.zeros(o.shape[0], jnp.int32), {}, 1), r"action or \(action, extras\)"),
    ],
)
def test_policy_with_the_wrong_action_is_rejected_before_running(policy, match):
    with pytest.raises(ValueError, match=match):
        jaxsim.rollout(ENV, policy, 5, num_envs=4)


def test_state_of_the_wrong_size_or_env_is_rejected():
    state = jaxsim.rollout(ENV, "random", 2, num_envs=3).final_state
    with pytest.raises(ValueError, match="state holds 3 environments but num_envs=4"):
        jaxsim.rollout(ENV, "random", 2, num_envs=4, state=state)
    pendulum = jaxsim.make("Pendulum-v1")
    with pytest.raises(TypeError, match="needs CartPoleState"):
        jaxsim.rollout(ENV, "random", 2, state=jaxsim.rollout(pendulum, "random", 2).final_state)
    with pytest.raises(TypeError, match="state must be a previous rollout's final_state"):
        jaxsim.rollout(ENV, "random", 2, state={"x": 1})


@pytest.mark.parametrize("backend", ["scan", "fused"])
def test_a_continuation_without_key_draws_fresh_randomness(backend):
    env = jaxsim.make("CartPole-v1", max_episode_steps=3)  # every lane resets in each chunk
    kw = dict(num_envs=4, backend=backend)
    if backend == "fused":
        kw["fused_config"] = jaxsim.FusedConfig(block_envs=4, steps_per_launch=3)
    first = jaxsim.rollout(env, "random", 6, **kw)
    second = jaxsim.rollout(env, "random", 6, state=first.final_state, **kw)
    assert not np.array_equal(first.action, second.action)
    # The same chunk's resets (steps 3 and 6 of a 3-step episode) are new draws too.
    assert not np.array_equal(first.obs[3], second.obs[3])
    # ...and deterministic: the state decides the continuation's key.
    again = jaxsim.rollout(env, "random", 6, state=first.final_state, **kw)
    np.testing.assert_array_equal(second.obs, again.obs)
    # A key given explicitly is used as before, whatever the state carries.
    keyed = jaxsim.rollout(env, "random", 6, state=first.final_state, key=KEY, **kw)
    plain = first.final_state.replace(next_key=None)
    np.testing.assert_array_equal(
        keyed.obs, jaxsim.rollout(env, "random", 6, state=plain, key=KEY, **kw).obs
    )
    # A chain of continuations never repeats a chunk.
    third = jaxsim.rollout(env, "random", 6, state=second.final_state, **kw)
    assert not np.array_equal(third.action, second.action)
    assert not np.array_equal(third.action, first.action)


def test_a_continuation_from_a_state_without_its_key_needs_one():
    start = jaxsim.initial_state(ENV, KEY, 4)
    assert start.next_key is not None  # initial_state's carries one, derived from its key
    out = jaxsim.rollout(ENV, "random", 3, state=start)
    assert out.final_state.next_key.shape == (4, 2)
    with pytest.raises(ValueError, match=r"state= carries no key to continue from.*pass key="):
        jaxsim.rollout(ENV, "random", 3, state=start.replace(next_key=None))
    with pytest.raises(ValueError, match=r"pass key="):
        jaxsim.rollout(ENV, "random", 3, state=start.env_state)
    jaxsim.rollout(ENV, "random", 3, state=start.env_state, key=KEY)


def test_a_state_dict_saved_before_next_key_still_restores():
    from flax import serialization

    final = jaxsim.rollout(ENV, "random", 2, num_envs=3).final_state
    saved = serialization.to_state_dict(final)
    np.testing.assert_array_equal(
        serialization.from_state_dict(final, saved).next_key, final.next_key
    )
    old = {k: v for k, v in saved.items() if k != "next_key"}  # an agents' checkpoint of before
    restored = serialization.from_state_dict(final, old)
    assert restored.next_key.shape == (3, 2) and not np.asarray(restored.next_key).any()
    with pytest.raises(ValueError, match="Unknown field"):
        serialization.from_state_dict(final, dict(saved, extra=1))


def test_a_repeated_rollout_does_not_trace_the_environment_again():
    # The per-call checks (memory, params) read what they need from caches and concrete values:
    # tracing init_state on every call cost 1.3-1.9 ms of a one-step CartPole rollout.
    calls = []

    class Counting(type(jaxsim.make("CartPole-v1"))):
        def init_state(self, u, params):
            calls.append(1)
            return super().init_state(u, params)

    env = Counting()
    jaxsim.rollout(env, "random", 3, num_envs=2, key=KEY)
    first = len(calls)
    for seed in range(3):
        out = jaxsim.rollout(env, "random", 3, num_envs=2, key=jax.random.key(seed))
    assert out.reward.shape == (3, 2) and first > 0
    assert len(calls) == first
