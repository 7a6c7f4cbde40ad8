"""jaxsim: reinforcement-learning experience at the speed of the hardware."""

from jaxsim import params, rng, sharding, spaces
from jaxsim.check_env import CheckReport, check_env
from jaxsim.contract import EnvCheckError
from jaxsim.core import Env, TimeStep
from jaxsim.envs import make, register, registered_ids, size_cpu_pool
from jaxsim.fused import FusedConfig
from jaxsim.gymnax_view import as_gymnax
from jaxsim.params_sampling import UniformParams, uniform_params
from jaxsim.policies import (
    MLPPolicy,
    OpenLoopPolicy,
    RandomPolicy,
    init_mlp_policy,
    orthogonal_init,
    random_policy,
)
from jaxsim.rendering import render_gif
from jaxsim.rng import Draws
from jaxsim.rollout import check_rollout, initial_state, rollout
from jaxsim.rollout.trajectory import STEP_OUTPUTS, EpisodeStats, RolloutState, Trajectory
from jaxsim.sharding import ENV_AXIS
from jaxsim.spaces import Box, Discrete

__version__ = "0.1.0"


def __getattr__(name: str):
    # The profiler loads when first used: `jaxsim.profile(fn)` or `with jaxsim.profile():`.
    if name == "profile":
        from jaxsim.profiler import profile

        globals()["profile"] = profile
        return profile
    raise AttributeError(f"module 'jaxsim' has no attribute {name!r}")


__all__ = [
    "ENV_AXIS",
    "STEP_OUTPUTS",
    "Box",
    "CheckReport",
    "Discrete",
    "Draws",
    "Env",
    "EnvCheckError",
    "EpisodeStats",
    "FusedConfig",
    "MLPPolicy",
    "OpenLoopPolicy",
    "RandomPolicy",
    "RolloutState",
    "TimeStep",
    "Trajectory",
    "UniformParams",
    "as_gymnax",
    "check_env",
    "check_rollout",
    "init_mlp_policy",
    "initial_state",
    "make",
    "orthogonal_init",
    "params",
    "profile",
    "random_policy",
    "register",
    "registered_ids",
    "render_gif",
    "rng",
    "rollout",
    "sharding",
    "size_cpu_pool",
    "spaces",
    "uniform_params",
]
