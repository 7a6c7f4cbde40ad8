"""Stable-Baselines3 interop: a `VecEnv` over jaxsim's batched, jitted step.

SB3 takes its own `VecEnv`, not a Gymnasium `VectorEnv`. `JaxsimSB3VecEnv` wraps
`jaxsim.gymnasium.JaxsimVectorEnv` in SAME_STEP mode, which is SB3's semantics: a step that ends
an episode returns the reset observation and puts the terminal one in
`infos[i]["terminal_observation"]`, with `infos[i]["TimeLimit.truncated"]` set for truncation.
Use it through `jaxsim.gymnasium.make_sb3_vec_env`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

try:
    from stable_baselines3.common.vec_env import VecEnv
except ImportError as e:  # optional: the `sb3` extra, after a CPU torch
    raise ImportError(
        "jaxsim.gymnasium.make_sb3_vec_env needs Stable-Baselines3: install torch first "
        "(pip install torch==2.13.0, the CPU build), then pip install 'jaxsim-rl[sb3]'"
    ) from e

import numpy as np
from gymnasium.vector import AutoresetMode

from jaxsim.gymnasium import JaxsimVectorEnv


class JaxsimSB3VecEnv(VecEnv):
    """`num_envs` copies of a jaxsim environment as an SB3 `VecEnv` (one jitted step call).

    The batch shares one state on the device, so the per-environment hooks (`get_attr`,
    `set_attr`, `env_method`) act on the one underlying `JaxsimVectorEnv` and repeat its answer
    for each index asked for.
    """

    def __init__(self, env_id: str, num_envs: int = 1, **kwargs):
        # Set before VecEnv.__init__, which reads `render_mode` through get_attr.
        self.venv = JaxsimVectorEnv(
            env_id, num_envs, autoreset_mode=AutoresetMode.SAME_STEP, **kwargs
        )
        super().__init__(
            num_envs, self.venv.single_observation_space, self.venv.single_action_space
        )
        self._actions = None

    def reset(self) -> np.ndarray:
        # SB3's `seed(s)` stores s + i per environment; the batch draws all resets from s.
        obs, _ = self.venv.reset(seed=self._seeds[0])
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self):
        actions = np.asarray(self._actions)
        if actions.ndim == 1 and self.venv.single_action_space.shape != ():
            actions = actions.reshape(self.num_envs, *self.venv.single_action_space.shape)
        obs, reward, terminated, truncated, info = self.venv.step(actions)
        done = terminated | truncated
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for i in np.flatnonzero(done):
            infos[i]["terminal_observation"] = info["final_obs"][i]
            # SB3 bootstraps from the terminal observation only where this is True.
            infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
        return obs, reward.astype(np.float32), done, infos

    def close(self) -> None:
        self.venv.close()

    def get_attr(self, attr_name: str, indices=None) -> list[Any]:
        return [getattr(self.venv, attr_name) for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        setattr(self.venv, attr_name, value)

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs):
        method = getattr(self.venv, method_name)
        return [method(*method_args, **method_kwargs) for _ in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        return [None for _ in range(self.num_envs)]
