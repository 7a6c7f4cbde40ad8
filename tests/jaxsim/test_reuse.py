"""`rollout(..., out=previous)`: a fresh rollout's results, written into the donated buffers."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh

import jaxsim

N, NUM_ENVS = 12, 8


def _with_extras(key, obs):
    """A policy recording extras of two dtypes (they are donated and checked like any field)."""
    action = (obs[:, 2] > 0).astype(jnp.int32)
    return action, {"value": obs.sum(-1), "step": jnp.zeros(obs.shape[0], jnp.int32)}


def _leaves(traj):
    names = ("obs", "action", "reward", "terminated", "truncated", "next_obs", "extras")
    names += ("episode_return", "episode_length")
    return {
        f"{name}{jax.tree_util.keystr(path)}": leaf
        for name in names
        for path, leaf in jax.tree_util.tree_flatten_with_path(getattr(traj, name))[0]
    }


@pytest.mark.parametrize(
    ("env_id", "policy", "outputs"),
    [
        ("CartPole-v1", "random", "all"),
        ("CartPole-v1", _with_extras, "all"),
        ("Pendulum-v1", "random", "rewards"),
        # The grid is recorded as row words and expanded after the loop, into the donated buffer.
        ("MinAtar/Breakout-v0", "random", "all"),
    ],
)
def test_out_reuses_the_buffers_and_equals_a_fresh_rollout(env_id, policy, outputs):
    env = jaxsim.make(env_id)
    kwargs = dict(num_envs=NUM_ENVS, outputs=outputs)
    first = jaxsim.rollout(env, policy, N, key=jax.random.key(1), **kwargs)
    fresh = jaxsim.rollout(env, policy, N, key=jax.random.key(2), **kwargs)
    donated = _leaves(first)
    pointers = {name: leaf.unsafe_buffer_pointer() for name, leaf in donated.items()}
    again = jaxsim.rollout(env, policy, N, key=jax.random.key(2), out=first, **kwargs)
    got, want = _leaves(again), _leaves(fresh)
    assert got.keys() == want.keys() == pointers.keys() and got
    for name, leaf in got.items():
        np.testing.assert_array_equal(np.asarray(leaf), np.asarray(want[name]), err_msg=name)
        assert leaf.unsafe_buffer_pointer() == pointers[name], f"{name} was not written in place"
        assert donated[name].is_deleted(), name
    for a, b in zip(
        jax.tree.leaves(again.final_state), jax.tree.leaves(fresh.final_state), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_out_chains_with_state_continuation():
    """The usual loop: continue from the last chunk's final_state, into its buffers."""
    env = jaxsim.make("CartPole-v1")
    traj = jaxsim.rollout(env, "random", N, num_envs=NUM_ENVS)
    plain = jaxsim.rollout(env, "random", N, state=traj.final_state)
    pointer = traj.obs.unsafe_buffer_pointer()
    for _ in range(2):
        traj = jaxsim.rollout(env, "random", N, state=traj.final_state, out=traj)
        assert traj.obs.unsafe_buffer_pointer() == pointer
        if plain is not None:
            np.testing.assert_array_equal(np.asarray(traj.reward), np.asarray(plain.reward))
            plain = None


def _refused(match, env, policy="random", error=ValueError, **kwargs):
    previous = jaxsim.rollout(env, "random", N, num_envs=NUM_ENVS)
    kwargs.setdefault("out", previous)
    kwargs.setdefault("num_envs", NUM_ENVS)
    with pytest.raises(error, match=match):
        jaxsim.rollout(env, policy, kwargs.pop("n", N), **kwargs)
    # Refused before any work: nothing was donated.
    assert not previous.obs.is_deleted()


def test_bad_out_is_refused_before_any_work():
    env = jaxsim.make("CartPole-v1")
    _refused("out must be a Trajectory.*got dict", env, error=TypeError, out={})
    _refused(r"out.obs has shape \(12, 8, 4\); .*\[13, 8, \.\.\.\]", env, n=13)
    _refused(r"out.obs has shape \(12, 8, 4\); .*\[12, 4, \.\.\.\]", env, num_envs=4)
    _refused(
        r"holds the per-step fields \['obs'.*outputs= keeps \['reward'", env, outputs="rewards"
    )
    _refused("needs per-step outputs", env, outputs="stats", out=_stats_only(env))
    _refused("backend='fused'", env, backend="fused")
    mesh = Mesh(np.array(jax.devices()[:1], dtype=object), (jaxsim.ENV_AXIS,))
    _refused("not supported with mesh=", env, mesh=mesh)
    # The policy's extras are compared with the traced policy, still before anything runs.
    _refused(r"out= holds buffers .* this rollout writes", env, policy=_with_extras)
    pendulum = jaxsim.make("Pendulum-v1")
    previous = jaxsim.rollout(env, "random", N, num_envs=NUM_ENVS)
    with pytest.raises(ValueError, match="comes from a rollout of CartPoleState"):
        jaxsim.rollout(pendulum, "random", N, num_envs=NUM_ENVS, out=previous)
    jaxsim.rollout(env, "random", N, num_envs=NUM_ENVS, out=previous)
    with pytest.raises(ValueError, match=r"out.obs was deleted \(already donated"):
        jaxsim.rollout(env, "random", N, num_envs=NUM_ENVS, out=previous)


def test_out_dtype_mismatch_names_the_field():
    env = jaxsim.make("CartPole-v1")
    previous = jaxsim.rollout(env, "random", N, num_envs=NUM_ENVS)
    bad = previous.replace(reward=previous.reward.astype(jnp.int32))
    with pytest.raises(ValueError, match=r"out.reward is int32\[12, 8\]; .* float32\[12, 8\]"):
        jaxsim.rollout(env, "random", N, num_envs=NUM_ENVS, out=bad)
    assert not bad.obs.is_deleted()


def _stats_only(env):
    return jaxsim.rollout(env, "random", N, num_envs=NUM_ENVS, outputs="stats")


def test_a_donation_xla_cannot_use_is_an_error_not_a_silent_copy():
    """JAX only warns when a donated buffer fits no output; out= must not claim reuse then."""
    from jaxsim.rollout.checks import donating

    run = donating(jax.jit(lambda x: x.sum(), donate_argnums=0))
    x = jnp.ones(1000)
    for _ in range(2):  # a failed compile caches nothing: every call is refused
        with pytest.raises(ValueError, match=r"out= could not be reused: .*float32\[1000\]"):
            run(x)
    assert not x.is_deleted()


def test_the_output_reuse_benchmark_runs_and_checks_equality(tmp_path):
    from benchmarks.micro import output_reuse

    path = tmp_path / "reuse.json"
    # This module's sizes: the benchmark's rollouts are programs the tests above compiled.
    argv = ["--num-envs", str(NUM_ENVS), "--steps", str(N), "--repeats", "2", "--out", str(path)]
    assert output_reuse.main(argv) == 0  # an exit code, as every measure module's main
    record = json.loads(path.read_text())
    assert len(record["rows"]) == 2 and record["median"]["reuse_s"] > 0
