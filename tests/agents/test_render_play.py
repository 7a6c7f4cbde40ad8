"""`python -m agents.play DIR --gif` films what it can draw (Swarm: by replaying the episode's
states, its observations do not show them) and refuses, before any work, what it cannot."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxsim
from agents import play
from agents.algorithms import agent_type
from agents.checkpoint import save_checkpoint
from agents.presets import config_for

pytest.importorskip("PIL", reason="the episode GIF needs Pillow (the `render` extra)")
from PIL import Image

TINY = dict(num_envs=2, num_steps=8, num_minibatches=1, update_epochs=1, hidden=(8,), eval_envs=2)


def _untrained_run(folder, env) -> None:
    """A run folder holding an untrained PPO checkpoint for `env` (training is not the point)."""
    config = config_for(env.id, "ppo", total_steps=16, **TINY)
    agent = agent_type("ppo")(config, env)
    runner = agent.init(jax.random.key(0))
    save_checkpoint(str(folder / "checkpoint.msgpack"), runner, config, env, None, {"seed": 0})


def test_replay_steps_through_the_rollouts_own_states():
    env = jaxsim.make("Swarm-N4-v0", max_episode_steps=6, arena=2.0)
    key = jax.random.key(4)
    out = jaxsim.rollout(env, "random", 6, num_envs=3, key=key)
    states = play.replay(env, env.default_params, key, out.action[:, 0], 3)
    assert len(states) == 7
    shown = np.stack([np.asarray(env.observe(s, env.default_params)) for s in states])
    end = int(np.argmax(np.asarray(out.done[:, 0])))  # the first episode of environment 0
    np.testing.assert_allclose(shown[: end + 1], out.obs[: end + 1, 0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(shown[end + 1], out.next_obs[end, 0], rtol=1e-5, atol=1e-6)


def test_play_writes_a_swarm_gif_and_refuses_one_it_cannot_draw(tmp_path, capsys):
    swarm = tmp_path / "swarm"
    swarm.mkdir()
    _untrained_run(swarm, jaxsim.make("Swarm-N4-v0", max_episode_steps=5))
    result = play.main([str(swarm), "--gif", str(tmp_path / "s.gif"), "--scale", "0.2"])
    assert result["gif"] == str(tmp_path / "s.gif")
    with Image.open(result["gif"]) as gif:
        assert gif.size == (100, 100)
        total_ms = 0
        for i in range(gif.n_frames):
            gif.seek(i)
            total_ms += gif.info["duration"]
    assert total_ms == (5 + 1) * 50  # a 5-step episode (no termination here) at 20 fps
    pytest.importorskip("gymnax", reason="an adapter is the environment that does not draw")
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    _untrained_run(adapter, jaxsim.make("gymnax/CartPole-v1"))
    with pytest.raises(SystemExit) as exit_info:
        play.main([str(adapter), "--gif", str(tmp_path / "a.gif")])
    assert exit_info.value.code == 2
    assert "gymnax/CartPole-v1 cannot draw itself" in capsys.readouterr().err
    assert not (tmp_path / "a.gif").exists()
