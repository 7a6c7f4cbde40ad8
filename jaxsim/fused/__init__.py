"""The fused backend: a Pallas kernel that runs many environment steps, and the policy, per launch.

`jaxsim.rollout(env, policy, n, backend="fused", fused_config=FusedConfig(...))` runs it. It
takes any environment whose physics is the elementwise `init_state` / `dynamics` / `obs_fields`
of `jaxsim.Env` (all five classic-control ones) and these policies: `RandomPolicy`,
`MLPPolicy` (weights are kernel inputs; log-probabilities and values are recorded as extras),
`OpenLoopPolicy` (actions given as an array), or any pytree policy with an elementwise
`act_from_seed(seed, index, obs)`. Params may be shared or per environment, and a
`params_sampler` whose leaves are arrays draws them per episode, as on the scan backend. Each
step is `jaxsim.transition.batch_step` on a block of lanes, so for the same key it gives the
scan backend's trajectories.
"""

from jaxsim.fused.config import FusedConfig, auto_backend, refusal, unsupported_reason


def __getattr__(name: str):
    # Pallas loads with the kernel, only when a fused rollout runs (it costs `import jaxsim`).
    if name == "fused_rollout":
        from jaxsim.fused.driver import fused_rollout

        return fused_rollout
    raise AttributeError(f"module 'jaxsim.fused' has no attribute {name!r}")


__all__ = [
    "FusedConfig",
    "auto_backend",
    "fused_rollout",
    "refusal",
    "unsupported_reason",
]
