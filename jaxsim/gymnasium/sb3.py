"""Stable-Baselines3 interop: a `VecEnv` over jaxsim's batched, jitted step.

SB3 takes its own `VecEnv`, not a Gymnasium `VectorEnv`. `JaxsimSB3VecEnv` wraps
`jaxsim.gymnasium.JaxsimVectorEnv` in SAME_STEP mode, which is SB3's semantics: a step that ends
an episode returns the reset observation and puts the terminal one in
`infos[i]["terminal_observation"]`, with `infos[i]["TimeLimit.truncated"]` set for truncation.
Use it through `jaxsim.gymnasium.make_sb3_vec_env`; wrap it in SB3's `VecMonitor` for SB3 to log
episode returns and lengths (as any VecEnv without a Monitor inside).
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

from jaxsim.gymnasium.vector import JaxsimVectorEnv, sb3_vector_kwargs


class JaxsimSB3VecEnv(VecEnv):
    """`num_envs` copies of a jaxsim environment as an SB3 `VecEnv` (one jitted step call).

    The batch shares one state on the device, so the per-environment hooks act on the one
    underlying `JaxsimVectorEnv`: `get_attr` reads it once and repeats the answer for each index
    asked for; `set_attr` and `env_method` act once on the whole batch, so their `indices` must
    be None or every index (a subset would act on the others too: refused). jaxsim's resets take
    no options: `set_options` refuses any, rather than dropping them at the next reset.
    """

    def __init__(self, env_id: str, num_envs: int = 1, **kwargs):
        kwargs = sb3_vector_kwargs(env_id, kwargs)
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

    def set_options(self, options: list[dict] | dict | None = None) -> None:
        given = options if isinstance(options, list | tuple) else [options]
        if any(given):
            raise ValueError(
                f"jaxsim/{self.venv.jax_env.id}: set_options: jaxsim's resets take no options, "
                f"got {options!r}"
            )
        super().set_options(options)

    def _whole_batch(self, hook: str, indices) -> list[int]:
        """`indices` as a list; a ValueError unless it names every environment once."""
        got = list(self._get_indices(indices))
        if sorted(got) != list(range(self.num_envs)):
            raise ValueError(
                f"jaxsim/{self.venv.jax_env.id}: {hook} acts on the whole batch at once (one "
                f"state on the device), so indices must be None or every index of "
                f"range({self.num_envs}), got {indices!r}"
            )
        return got

    def get_attr(self, attr_name: str, indices=None) -> list[Any]:
        return [getattr(self.venv, attr_name) for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        self._whole_batch("set_attr", indices)
        setattr(self.venv, attr_name, value)

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs):
        got = self._whole_batch(f"env_method({method_name!r})", indices)
        method = getattr(self.venv, method_name)
        result = method(*method_args, **method_kwargs)  # once: the batch's one call
        return [result for _ in got]

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        return [None for _ in range(self.num_envs)]
