"""MinAtar SpaceInvaders and Seaquest against the original `minatar` package, step for step."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxsim
from benchmarks.gpu.lowering import TRITON_CALL, lower_for_cuda
from jaxsim.envs.minatar.seaquest import Seaquest
from jaxsim.envs.minatar.space_invaders import SpaceInvaders
from jaxsim.fused import FusedConfig

minatar = pytest.importorskip("minatar")

# The harness imports the original package: only once the skip above has passed.
from minatar_si_seaquest_harness import (  # noqa: E402
    GAMES,
    jaxsim_episode_stats,
    original_episodes,
    run_lockstep,
)


@pytest.mark.parametrize("game", sorted(GAMES))
def test_step_parity_with_original(game):
    """>= 10,000 steps over hundreds of episodes, sticky actions 0.1 and ramping on: the
    observation, reward, termination and the whole hidden state equal the original's."""
    bad, first, steps, episodes, seen = run_lockstep(game, num_envs=64, steps=160, seed=1)
    assert steps >= 10_000 and episodes >= 100, (steps, episodes)
    assert bad == dict(obs=0, reward=0, terminal=0, state=0), first
    missed = sorted(name for name, count in seen.items() if count == 0)
    assert not missed, f"the parity run never reached {missed}: {seen}"


@pytest.mark.parametrize("game", sorted(GAMES))
def test_step_parity_without_ramping(game):
    """`difficulty_ramping=False` as the original's: waves cleared, surfacings, no ramp."""
    bad, first, steps, episodes, seen = run_lockstep(
        game, num_envs=32, steps=80, seed=2, ramping=False
    )
    assert bad == dict(obs=0, reward=0, terminal=0, state=0), first
    assert seen["ramp"] == 0
    assert seen["wave cleared" if game == "space_invaders" else "full surfacing"] > 0, seen


@pytest.mark.parametrize("game", sorted(GAMES))
def test_random_policy_matches_original(game):
    """Mean return and episode length under random actions agree with the original's within
    a few standard errors of the two samples. jaxsim's sample is the episodes that end within
    the rollout, which leaves out each environment's last, unfinished one: a long rollout of
    few environments keeps that bias toward short episodes (a thirtieth or so of them) small."""
    returns, lengths = original_episodes(game, episodes=400, seed=3)
    stats = jaxsim_episode_stats(GAMES[game][0](), num_envs=16, steps=1500, seed=3)
    count = int(stats.count)
    assert count >= 300, count
    for name, ours, theirs in (
        ("return", float(stats.mean_return), returns),
        ("length", float(stats.mean_length), lengths),
    ):
        # The standard error of the difference, both samples taken as the original's spread.
        se = theirs.std() * np.sqrt(1 / len(theirs) + 1 / count)
        assert abs(ours - theirs.mean()) < 4 * se + 1e-6, (name, ours, theirs.mean(), se)


# ---------------------------------------------------------------------------- fused backend
# Overrides that make every path happen within a short rollout: truncation and auto-reset,
# the sticky repeat (half the steps), deaths (SpaceInvaders' aliens shooting every other step),
# Seaquest's spawns (its first enemy comes at step 20). 40 steps of 12 environments, as
# test_minatar_obs_dtype.py's rollouts of the -v0 ids: the overrides are params (arrays), so the
# scan's program is that test's, compiled once in a run (the compilation cache loads it again).
FUSED = {
    "space_invaders": dict(max_episode_steps=30, sticky_action_prob=0.5, enemy_shot_interval=1),
    "seaquest": dict(max_episode_steps=30, sticky_action_prob=0.5, max_oxygen=12),
}


# Seaquest's interpreted kernel takes ~30 s of CPU to compile.
@pytest.mark.parametrize(
    "game", ["space_invaders", pytest.param("seaquest", marks=pytest.mark.slow)]
)
def test_fused_kernel_equals_scan(game):
    """The Pallas kernel (interpreted) steps through the scan backend's episodes bit for bit:
    every per-step output, the [10, 10, C] observations included, and the final state."""
    env = GAMES[game][0](**FUSED[game])
    config = FusedConfig(block_envs=8, steps_per_launch=8, interpret=True)
    kw = dict(num_envs=12, key=jax.random.key(5), outputs="all")
    scan = jaxsim.rollout(env, "random", 40, backend="scan", **kw)
    fused = jaxsim.rollout(env, "random", 40, backend="fused", fused_config=config, **kw)
    assert scan.obs.shape == (40, 12, 10, 10, env.num_channels)
    assert bool(scan.terminated.any()) and bool(scan.truncated.any())
    for (path, a), b in zip(jax.tree.leaves_with_path(scan), jax.tree.leaves(fused), strict=True):
        np.testing.assert_array_equal(np.asarray(b), np.asarray(a), err_msg=str(path))


@pytest.mark.slow
@pytest.mark.parametrize("game", sorted(GAMES))
def test_fused_kernel_lowers_for_triton_on_cuda(game):
    """Lowered (not compiled) for CUDA from the CPU: a Triton lowering gap shows without a GPU."""
    env = GAMES[game][0]()
    config = FusedConfig(block_envs=128, steps_per_launch=8, interpret=False)

    def run(key):
        return jaxsim.rollout(
            env, "random", 16, num_envs=256, key=key, backend="fused", fused_config=config
        )

    assert TRITON_CALL in lower_for_cuda(run, jax.random.key(0)).as_text()


# ------------------------------------------------------------------------------------ ids
def test_ids_action_sets_channels_and_defaults():
    """As the original's Gymnasium ids: -v0 all six actions, -v1 the minimal set; the original's
    [10, 10, C] grid; sticky actions 0.1 and the ramp on by default."""
    for game, cls, channels, minimal in (
        ("SpaceInvaders", SpaceInvaders, 6, 4),
        ("Seaquest", Seaquest, 10, 6),
    ):
        full, small = jaxsim.make(f"MinAtar/{game}-v0"), jaxsim.make(f"MinAtar/{game}-v1")
        assert isinstance(full, cls) and isinstance(small, cls)
        assert full.action_space(full.default_params).n == 6
        assert small.action_space(small.default_params).n == minimal
        assert full.observation_space(full.default_params).shape == (10, 10, channels)
        assert float(full.default_params.sticky_action_prob) == pytest.approx(0.1)
        assert bool(full.default_params.difficulty_ramping)
        original_set = minatar.Environment(cls.game).minimal_action_set()
        assert list(cls.minimal_actions) == original_set
