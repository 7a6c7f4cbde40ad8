"""Compact auto-reset (done lanes gathered, reset alone) equals the whole-batch reset, bitwise."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim
from jaxsim.rng import ResetDraws
from jaxsim.rollout.step import Lanes, batch_step, initial_carry, reset_slots, with_episode_params

KEY = jax.random.key(3)


def test_reset_slots_are_a_sixteenth_of_the_batch_rounded_up_to_a_power_of_two():
    assert [reset_slots(n) for n in (1, 16, 17, 100, 256, 2048, 4096)] == [1, 1, 2, 8, 16, 128, 256]


def test_compact_reset_needs_a_whole_batch():
    with pytest.raises(ValueError, match="compact_reset=True needs vmapped=True"):
        Lanes(vmapped=False, compact_reset=True)


def _scan(env, compact, actions, params, sampler=None):
    """A rollout written out with batch_step: (per-step records, final carry, done counts)."""
    num_envs = actions.shape[1]
    lanes = Lanes(vmapped=True, compact_reset=compact)
    params_axes = env.params_axes(params, num_envs)
    draws = ResetDraws.for_rollout(env, KEY, num_envs, sampler)

    def body(carry, xs):
        t, action = xs
        counter = (t + 1).astype(jnp.uint32)
        carry, rec = batch_step(env, lanes, carry, action, params, params_axes, counter, draws)
        step_params, axes = with_episode_params(params, params_axes, carry.episode_params)
        rec["obs_after"] = lanes.observe(env, carry.env_state, step_params, axes)
        return carry, rec

    @jax.jit
    def run():
        carry = initial_carry(env, lanes, params, params_axes, draws, True, False)
        steps = jnp.arange(actions.shape[0], dtype=jnp.int32)
        return jax.lax.scan(body, carry, (steps, actions))

    carry, record = run()
    return record, carry, np.asarray(record["terminated"] | record["truncated"]).sum(axis=1)


def _actions(env, n, num_envs):
    space = env.action_space(env.default_params)
    keys = jax.random.split(jax.random.key(5), n * num_envs)
    return jax.vmap(space.sample)(keys).reshape(n, num_envs, *space.shape)


def _check_equal(env, actions, params, sampler=None):
    whole, whole_carry, done = _scan(env, False, actions, params, sampler)
    compact, compact_carry, _ = _scan(env, True, actions, params, sampler)
    slots = reset_slots(actions.shape[1])
    # The run must take both compact branches: a few done (gathered) and more than the slots.
    assert ((done > 0) & (done <= slots)).any() and (done > slots).any(), done
    for a, b in zip(jax.tree.leaves(whole), jax.tree.leaves(compact), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for a, b in zip(jax.tree.leaves(whole_carry), jax.tree.leaves(compact_carry), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # jaxsim.rollout resets compactly: same actions, same episodes. It is another program, so
    # XLA may fuse its float arithmetic differently (README: gaps of 6e-5 on CartPole).
    out = jaxsim.rollout(
        env,
        jaxsim.OpenLoopPolicy(actions),
        actions.shape[0],
        num_envs=actions.shape[1],
        key=KEY,
        params=params,
        params_sampler=sampler,
    )
    for name in ("terminated", "truncated", "episode_length"):
        np.testing.assert_array_equal(np.asarray(getattr(out, name)), np.asarray(whole[name]))
    np.testing.assert_allclose(np.asarray(out.reward), np.asarray(whole["reward"]), rtol=1e-5)
    for a, b in zip(
        jax.tree.leaves(out.final_state.env_state),
        jax.tree.leaves(whole_carry.env_state),
        strict=True,
    ):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)


def _time_limits(env, num_envs, short):
    """Per-environment time limits: the first `short` lanes end every 3 steps, all at once (more
    than the slots); four more end alone now and then (within them)."""
    limits = np.full((num_envs,), 200, np.int32)
    limits[:short] = 3
    limits[short : short + 4] = (4, 5, 7, 11)
    return env.default_params.replace(max_episode_steps=jnp.asarray(limits))


def test_compact_reset_equals_the_whole_batch_reset_on_a_native_env():
    env = jaxsim.make("CartPole-v1")
    num_envs = 64  # 4 slots; random episodes end every ~22 steps, 16 lanes together every 3rd
    sampler = jaxsim.uniform_params(env, masspole=(0.05, 0.5))  # per-episode params scatter too
    _check_equal(env, _actions(env, 24, num_envs), _time_limits(env, num_envs, 16), sampler)


def test_compact_reset_equals_the_whole_batch_reset_on_an_adapter():
    pytest.importorskip("gymnax", reason="gymnax not installed: pip install 'jaxsim-rl[gymnax]'")
    env = jaxsim.make("gymnax/Breakout-MinAtar")
    num_envs = 32  # 2 slots; resets draw from a PRNG key (Draws(reset='key'))
    _check_equal(env, _actions(env, 12, num_envs), _time_limits(env, num_envs, 8))


def test_compact_reset_benchmark_checks_and_records(tmp_path):
    import json

    from benchmarks.micro import compact_reset

    out = tmp_path / "cr.json"
    args = ["--env", "CartPole-v1", "--num-envs", "32", "--steps", "40", "--repeats", "1"]
    assert compact_reset.main([*args, "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    (point,) = record["results"]
    assert point["check"]["pass"] and point["check"]["bitwise_equal"]
    assert point["check"]["episodes_ended"] > 0
    assert point["compact_over_whole"] > 0 and record["provenance"]["commit"]
