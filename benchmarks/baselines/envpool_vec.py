"""Stable-Baselines3 on EnvPool: a `VecEnv` over the decoupled mode's synchronous EnvPool pool.

SB3 steps `VecEnv`s that reset a finished environment in the same step and hand its last
observation back in `infos[i]["terminal_observation"]`; EnvPool resets on the step after.
`EnvPoolVecEnv` steps `agents.decoupled.host_envs.EnvPoolPool` (synchronous, every environment
per step), which resets finished environments at once, so SB3 trains on the very environments,
and the same auto-reset, that jaxsim's actors step. EnvPool seeds its environments when the pool
is made (`seed`, environment i from seed + i in EnvPool); `VecEnv.seed`, which SB3's models call,
cannot reseed them and is recorded only. Observations come back as float32.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agents.decoupled.host_envs import EnvPoolPool


def envpool_vec_env(task: str, num_envs: int, seed: int):
    """An SB3 `VecEnv` of `num_envs` EnvPool `task` environments (e.g. "CartPole-v1")."""
    from stable_baselines3.common.vec_env import VecEnv

    class EnvPoolVecEnv(VecEnv):
        def __init__(self):
            self.pool = EnvPoolPool(f"envpool/{task}", num_envs, seed)
            super().__init__(num_envs, self.pool.env.observation_space, self.pool.env.action_space)
            self._ids = np.arange(num_envs, dtype=np.int32)
            self._actions = None

        def reset(self):
            rows = self.pool.reset()
            self._reset_seeds()
            self._reset_options()
            return rows.obs

        def step_async(self, actions: np.ndarray) -> None:
            self._actions = np.asarray(actions).reshape(num_envs, *self.action_space.shape)

        def step_wait(self):
            self.pool.send(self._actions, self._ids)
            rows = self.pool.recv()
            dones = rows.terminated | rows.truncated
            infos: list[dict[str, Any]] = [{} for _ in range(num_envs)]
            for i in np.flatnonzero(dones):
                infos[i]["terminal_observation"] = rows.final_obs[i]
                # SB3 bootstraps from the critic where an episode was cut, not ended.
                infos[i]["TimeLimit.truncated"] = bool(rows.truncated[i] and not rows.terminated[i])
            return rows.obs, rows.reward, dones, infos

        def close(self) -> None:
            self.pool.close()

        def get_attr(self, attr_name, indices=None):
            if attr_name == "render_mode":
                return [None] * len(self._indices(indices))
            raise AttributeError(f"EnvPoolVecEnv has no per-environment attribute {attr_name!r}")

        def set_attr(self, attr_name, value, indices=None) -> None:
            raise AttributeError(f"EnvPoolVecEnv cannot set {attr_name!r} on EnvPool's envs")

        def env_method(self, method_name, *args, indices=None, **kwargs):
            raise AttributeError(f"EnvPoolVecEnv cannot call {method_name!r} on EnvPool's envs")

        def env_is_wrapped(self, wrapper_class, indices=None):
            return [False] * len(self._indices(indices))

        def _indices(self, indices):
            if indices is None:
                return range(num_envs)
            return [indices] if isinstance(indices, int) else indices

    return EnvPoolVecEnv()
