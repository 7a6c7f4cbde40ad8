"""brax environments in jaxsim: `jaxsim.make("brax/ant", backend="positional")`.

brax's own `reset` and `step` run untouched; jaxsim owns the time limit and auto-reset (brax's
`EpisodeWrapper` and `AutoResetWrapper` are not used).

- Static config: the physics `backend` ("generalized", "positional", "spring" or "mjx"; brax's
  default per environment) and every int, float or bool keyword of the environment's
  constructor (e.g. Ant's `ctrl_cost_weight`, `terminate_when_unhealthy`). They are baked into
  brax's environment object, so they are static: a change recompiles. Tuple-valued keywords
  (`healthy_z_range`) keep brax's defaults.
- Params: `max_episode_steps` (default 1000, brax's usual episode length) is the only field
  that can vary per environment: brax keeps its physical constants in the system description
  (`env.sys`), not in a params pytree.
- Flags: `terminated` is brax's `done` (e.g. Ant falling); `truncated` is jaxsim's time limit.
- Spaces: actions in the actuators' control range (brax's `sys.actuator.ctrl_range`), as given:
  brax does not clip them; observations float32[observation_size], unbounded.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect

import jax.numpy as jnp
import numpy as np

from jaxsim.envs import adapters
from jaxsim.envs.adapters import AdapterEnv, AdapterState

PREFIX = "brax"
BACKENDS = ("generalized", "positional", "spring", "mjx")
EPISODE_LENGTH = 1000  # brax's training default


class BraxEnv(AdapterEnv):
    """A brax environment; one subclass per brax name (made by `make`)."""

    library = "brax"
    _brax_name: str

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._brax_env = _brax_env(self._brax_name, tuple(sorted(self._config_dict().items())))
        # Read once, outside any trace: brax keeps the control range as a device array.
        ctrl_range = np.asarray(self._brax_env.sys.actuator.ctrl_range, np.float32)
        size = (self._brax_env.action_size,)
        self._action_space = adapters.box(ctrl_range[:, 0], ctrl_range[:, 1], size)
        self._observation_space = adapters.box(-np.inf, np.inf, (self._brax_env.observation_size,))

    def _config_dict(self) -> dict:
        return {f.name: getattr(self.config, f.name) for f in dataclasses.fields(self.config)}

    def init_state(self, key, params) -> AdapterState:
        inner = adapters.strong_types(self._brax_env.reset(key))
        return AdapterState(inner, adapters.float_obs(inner.obs), jnp.int32(0))

    def dynamics(self, state: AdapterState, action, params):
        inner = adapters.strong_types(self._brax_env.step(state.inner, action))
        next_state = AdapterState(inner, adapters.float_obs(inner.obs), state.time)
        return next_state, inner.reward, inner.done > 0.5

    def observation_space(self, params):
        return self._observation_space

    def action_space(self, params):
        return self._action_space


@functools.cache
def _brax_env(name: str, config: tuple):
    from brax import envs

    return envs.get_environment(name, **dict(config))


def _brax_envs(env_id: str) -> dict:
    adapters.import_library("brax", env_id, PREFIX)
    from brax import envs

    return envs._envs  # brax's registry dict (it has no public listing)


@functools.cache
def env_class(name: str) -> type[BraxEnv]:
    """The jaxsim class wrapping brax's `name`, its static config read off the constructor."""
    env_id = f"{PREFIX}/{name}"
    registry = _brax_envs(env_id)
    if name not in registry:
        raise ValueError(
            f"make: unknown brax name {name!r} in {env_id!r}; brax has {sorted(registry)}"
        )
    config_fields, params_fields = {}, {}
    for arg in inspect.signature(registry[name].__init__).parameters.values():
        if arg.name == "backend":
            doc = "brax's physics backend"
            config_fields[arg.name] = (str, arg.default, doc, {"choices": BACKENDS})
            continue
        kind = (
            adapters.scalar_kind(arg.default)
            if arg.default is not inspect.Parameter.empty
            else None
        )
        if kind is not None:
            doc = f"brax {name} constructor argument {arg.name}"
            config_fields[arg.name] = (kind, arg.default, doc, {})
    params_fields["max_episode_steps"] = adapters.max_steps_field(EPISODE_LENGTH, PREFIX)
    cls_name = "".join(c for c in name.title() if c.isalnum())
    config_type = adapters.declared_dataclass(
        f"Brax{cls_name}Config", config_fields, f"Static config of {env_id}.", pytree=False
    )
    params_type = adapters.declared_dataclass(
        f"Brax{cls_name}Params", params_fields, f"Params of {env_id}."
    )
    return type(
        f"Brax{cls_name}",
        (BraxEnv,),
        {
            "id": env_id,
            "params_type": params_type,
            "config_type": config_type,
            "_brax_name": name,
            "__doc__": f"brax's {name} through jaxsim (see jaxsim.envs.brax_adapter).",
        },
    )


def make(name: str, **kwargs) -> BraxEnv:
    """`jaxsim.make("brax/<name>", **kwargs)`: kwargs are static config or params fields."""
    return env_class(name)(**kwargs)
