"""The vector Gymnasium env's packed buffer: one output per step, donated, state still readable."""

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

import jaxsim.gymnasium  # noqa: E402, F401 (registers jaxsim/<id>)


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_a_step_is_one_donated_buffer_holding_the_state_and_the_outputs(mode):
    venv = gym.make_vec(
        "jaxsim/CartPole-v1", num_envs=8, vectorization_mode="vector_entry_point",
        autoreset_mode=mode,
    )  # fmt: skip
    venv.reset(seed=0)
    before = venv._words
    obs, reward, terminated, truncated, _ = venv.step(np.ones(8, np.int64))
    assert before.is_deleted()  # donated: the step wrote its state over the last buffer
    words = venv._words
    host = np.asarray(words)[venv._layout.size :].view(np.float32)
    np.testing.assert_array_equal(host[:32].reshape(8, 4), obs)
    np.testing.assert_array_equal(host[32:40], reward)
    assert venv._step_fn._cache_size() == 1  # one program, whatever the step count
    assert int(venv._moving.counter) == 1
    # The returned arrays are copies: the next step may reuse the buffer under them.
    obs_copy = obs.copy()
    venv.step(np.zeros(8, np.int64))
    np.testing.assert_array_equal(obs, obs_copy)
    assert obs.flags.writeable and reward.flags.writeable
