"""Deterministic evaluations of a decoupled run's policy on fresh host pools: the stop checks and
the independent evaluation that confirms one (the agents' solve rule, `agents.loop.confirmed`)."""

from __future__ import annotations

import time

import jax
import numpy as np

from agents.decoupled.host_envs import make_pool
from agents.decoupled.learner import HostPPO
from agents.networks import to_policy


def _greedy_action(acting, obs):
    return to_policy(acting.params, acting.obs_stats, True)(jax.random.key(0), obs)[0]


class HostEvaluator:
    """Deterministic evaluations of the learner's policy on fresh host pools, the first episode
    of each environment: the stop checks and the independent evaluation that confirms one."""

    def __init__(self, learner: HostPPO, env_id: str, max_steps: int):
        self.learner, self.env_id, self.max_steps = learner, env_id, max_steps
        self.policy = jax.jit(_greedy_action)  # once: every evaluation reuses its compile
        self.wall_s = 0.0  # seconds spent evaluating, all calls together

    def returns(self, state, episodes: int, seed: int) -> np.ndarray:
        """float64[episodes] returns (an episode still running after `max_steps` counts with
        its return so far), on `episodes` environments of a pool seeded `seed`."""
        t0 = time.perf_counter()
        pool = make_pool(self.env_id, episodes, seed)
        acting = self.learner.acting(state)
        returns, done = np.zeros(episodes), np.zeros(episodes, bool)
        try:
            rows = pool.reset()
            for _ in range(self.max_steps):
                action = np.asarray(self.policy(acting, rows.obs))
                pool.send(action, rows.env_ids)
                rows = pool.recv()
                live = rows.transition & ~done[rows.env_ids]
                returns[rows.env_ids[live]] += rows.reward[live]
                done[rows.env_ids[live & (rows.terminated | rows.truncated)]] = True
                if done.all():
                    break
        finally:
            pool.close()
            self.wall_s += time.perf_counter() - t0
        return returns


def check_seed(seed: int, update: int) -> int:
    """The pool seed of the stop check after `update` updates (as `agents.loop.check_keys`)."""
    return int(np.random.SeedSequence([seed, 2, update]).generate_state(1)[0] % 2**30)


def evaluation_seed(seed: int) -> int:
    """The pool seed of the final, confirming evaluation (as `agents.loop.evaluation_keys`): apart
    from every stop check's and from the actors' (`DecoupledConfig.pool_seed`)."""
    return int(np.random.SeedSequence([seed, 1]).generate_state(1)[0] % 2**30)
