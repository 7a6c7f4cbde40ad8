"""Messages for two misuses that JAX alone explains badly: drawing a batch of states, and using a
trajectory whose buffers `rollout(..., out=)` donated."""

import jax
import numpy as np
import pytest

import jaxsim


@pytest.mark.parametrize("env_id", ["MinAtar/Breakout-v0", "CartPole-v1"])
def test_rendering_a_batch_of_states_says_to_pick_one_environment(env_id):
    env = jaxsim.make(env_id)
    batch = jaxsim.rollout(env, "random", 3, num_envs=4).final_state.env_state
    with pytest.raises(ValueError) as info:
        env.render(batch)
    message = str(info.value)
    assert f"{env_id} state is a batch of 4 environments' states" in message
    assert "jax.tree.map(lambda x: x[i], state)" in message and "vmap" not in message
    one = jax.tree.map(lambda x: x[2], batch)
    assert env.render(one).dtype == np.uint8  # what the message says works
    if env_id == "CartPole-v1":  # a shape that is no batch keeps the state check's own message
        bad = one.replace(x=np.zeros((2, 3), np.float32))
        with pytest.raises(ValueError, match=r"state\.x has shape \(2, 3\)"):
            env.render(bad)


def test_a_trajectory_donated_by_out_says_so_when_used():
    env = jaxsim.make("CartPole-v1")
    policy = jaxsim.init_mlp_policy(jax.random.key(1), env)
    first = jaxsim.rollout(env, policy, 10, num_envs=4)
    second = jaxsim.rollout(env, policy, 10, state=first.final_state, out=first)
    uses = {
        "Trajectory.obs (float32[10, 4, 4])": lambda: first.obs.sum(),
        "Trajectory.reward (float32[10, 4])": lambda: np.asarray(first.reward),
        "Trajectory.terminated (bool[10, 4])": lambda: first.episode_stats(),
        "Trajectory.extras['log_prob']": lambda: first.extras["log_prob"] + 1,
    }
    for where, use in uses.items():
        with pytest.raises(RuntimeError) as info:
            use()
        assert str(info.value).startswith(where) and "donated by rollout(..., out=)" in str(
            info.value
        )
    assert "donated by rollout(out=)" in repr(first)  # printing it does not raise
    with pytest.raises(ValueError, match=r"out.obs was deleted \(already donated"):
        jaxsim.rollout(env, policy, 10, state=second.final_state, out=first)
    assert np.isfinite(np.asarray(second.reward)).all()
    assert first.final_state.env_state.x.shape == (4,)  # not donated: still there
