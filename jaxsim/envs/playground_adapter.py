"""MuJoCo Playground's dm_control suite in jaxsim: `jaxsim.make("playground/CartpoleBalance")`.

brax points to MuJoCo Playground (package `playground`) as its maintained successor. Its
dm_control-suite environments ship their models in the wheel and run on the CPU with MJX's JAX
implementation; its locomotion and manipulation environments download robot models on first
use and are not offered here.

- Static config: the scalar entries of Playground's default config for the environment
  (`ctrl_dt`, `sim_dt`, `action_repeat`, `naconmax`, `njmax`) and `impl`, MJX's implementation:
  "jax" by default here (pure JAX: runs on any device), or "warp" (Playground's default, needs
  the warp package). `episode_length` becomes jaxsim's `max_episode_steps` (a params field,
  the only one: physical constants live in the MuJoCo model). Vision is not offered.
- Flags: `terminated` is Playground's `done` (non-finite physics in the suite's tasks);
  `truncated` is jaxsim's time limit.
- Spaces: actions in the actuators' control range, observations float32[observation_size].
"""

from __future__ import annotations

import functools

from jaxsim.envs import adapters
from jaxsim.envs.adapters import StateStepEnv

PREFIX = "playground"
IMPLS = ("jax", "warp")
_CONFIG_SKIPPED = ("episode_length", "vision", "vision_config", "impl")


class PlaygroundEnv(StateStepEnv):
    """A MuJoCo Playground environment; one subclass per name (made by `make`)."""

    library = "playground"
    _playground_name: str

    @classmethod
    @functools.cache
    def _build(cls, config: tuple):
        from mujoco_playground import registry

        playground_config = registry.get_default_config(cls._playground_name)
        for name, value in config:
            playground_config[name] = value
        return registry.load(cls._playground_name, config=playground_config)

    @staticmethod
    def _ctrl_range(inner_env):
        return inner_env.mj_model.actuator_ctrlrange


def _registry(env_id: str):
    adapters.import_library("mujoco_playground", env_id, PREFIX)
    from mujoco_playground import registry

    return registry


@functools.cache
def env_class(name: str) -> type[PlaygroundEnv]:
    """The jaxsim class wrapping Playground's `name`, its static config read off its config."""
    env_id = f"{PREFIX}/{name}"
    registry = _registry(env_id)
    names = registry.dm_control_suite.ALL_ENVS
    if name not in names:
        raise ValueError(
            f"make: unknown Playground name {name!r} in {env_id!r}; the dm_control-suite "
            f"environments are {sorted(names)}"
        )
    default = registry.get_default_config(name)
    config_fields = {"impl": (str, "jax", "MJX's implementation", {"choices": IMPLS})}
    for key in default:
        kind = adapters.scalar_kind(default[key])
        if key not in _CONFIG_SKIPPED and kind is not None:
            config_fields[key] = (kind, default[key], f"Playground {name} config.{key}", {})
    params_fields = {"max_episode_steps": adapters.max_steps_field(default.episode_length, PREFIX)}
    return adapters.adapter_class(
        PlaygroundEnv, env_id, params_fields, config_fields, _playground_name=name
    )


def make(name: str, **kwargs) -> PlaygroundEnv:
    """`jaxsim.make("playground/<name>", **kwargs)`: kwargs are static config or params fields."""
    return env_class(name)(**kwargs)
