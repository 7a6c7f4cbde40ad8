"""The fused backend: a Pallas kernel that runs many environment steps, and the policy, per launch.

`jaxsim.rollout(env, policy, n, backend="fused", fused_config=FusedConfig(...))` runs it. It
takes any environment whose physics is the elementwise `init_state` / `dynamics` / `obs_fields`
of `jaxsim.Env` (all five classic-control ones) and these policies: `RandomPolicy`,
`MLPPolicy` (weights are kernel inputs; log-probabilities and values are recorded as extras),
`OpenLoopPolicy` (actions given as an array), or any pytree policy with an elementwise
`act_from_seed(seed, index, obs)`. Params may be shared or per environment, and a
`params_sampler` whose leaves are arrays draws them per episode, as on the scan backend. Each
step is `jaxsim.rollout.step.batch_step` on a block of lanes, so for the same key it gives the
scan backend's trajectories. The driver (`jaxsim.fused.driver.run_fused`) takes the spec the
rollout resolved (`jaxsim.rollout.spec`); Pallas loads with it, only when a fused rollout runs.
"""

from jaxsim.fused.config import FusedConfig, auto_backend, refusal, unsupported_reason

__all__ = [
    "FusedConfig",
    "auto_backend",
    "refusal",
    "unsupported_reason",
]
