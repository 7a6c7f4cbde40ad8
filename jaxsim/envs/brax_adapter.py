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
- Names: every brax name but those in `REFUSED` (named with the reason); `available()` lists
  them.
- Spaces: actions in the actuators' control range (brax's `sys.actuator.ctrl_range`), as given:
  brax does not clip them; observations float32[observation_size], unbounded.
"""

from __future__ import annotations

import functools
import inspect

from jaxsim.envs import adapters
from jaxsim.envs.adapters import StateStepEnv

PREFIX = "brax"
BACKENDS = ("generalized", "positional", "spring", "mjx")
EPISODE_LENGTH = 1000  # brax's training default
# brax names jaxsim does not serve, and why.
REFUSED = {
    "fast": "brax's test double for its training code: it has no physics system (no `sys`, "
    "no actuators) to simulate",
}


class BraxEnv(StateStepEnv):
    """A brax environment; one subclass per brax name (made by `make`)."""

    library = "brax"
    _brax_name: str

    @classmethod
    @functools.cache
    def _build(cls, config: tuple):
        from brax import envs

        return envs.get_environment(cls._brax_name, **dict(config))

    @staticmethod
    def _ctrl_range(inner_env):
        return inner_env.sys.actuator.ctrl_range


def _brax_envs(env_id: str) -> dict:
    adapters.import_library("brax", env_id, PREFIX)
    from brax import envs

    return envs._envs  # brax's registry dict (it has no public listing)


def available() -> list[str]:
    """The brax names `jaxsim.make("brax/<name>")` serves: brax's, less `REFUSED`."""
    return sorted(set(_brax_envs(f"{PREFIX}/<name>")) - set(REFUSED))


@functools.cache
def env_class(name: str) -> type[BraxEnv]:
    """The jaxsim class wrapping brax's `name`, its static config read off the constructor."""
    env_id = f"{PREFIX}/{name}"
    if name in REFUSED:
        raise ValueError(f"make: {env_id!r} is not served: {REFUSED[name]}")
    registry = _brax_envs(env_id)
    if name not in registry:
        raise ValueError(
            f"make: unknown brax name {name!r} in {env_id!r}; the brax names served are "
            f"{available()}"
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
    return adapters.adapter_class(BraxEnv, env_id, params_fields, config_fields, _brax_name=name)


def make(name: str, **kwargs) -> BraxEnv:
    """`jaxsim.make("brax/<name>", **kwargs)`: kwargs are static config or params fields."""
    return env_class(name)(**kwargs)
