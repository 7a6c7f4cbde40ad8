"""Checked mode (`rollout(..., checks=True)`): the first step and environment that went wrong.

Every step of a checked rollout flags, per environment, non-finite observations, rewards and
policy extras, and Discrete actions outside the space, whether or not `outputs=` keeps them.
The flags accumulate in a `CheckState` carried beside the environments' state (elementwise, so
the fused kernel carries it too); `raise_on_failure` turns it into one error on the host.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxsim import params as params_lib
from jaxsim.sharding import to_host


def clip_action(env, action):
    """A Discrete action clipped into {0, ..., n - 1}; any other action unchanged."""
    space = env.action_space(env.default_params)
    n = getattr(space, "n", None)
    if n is None:
        return action
    return jnp.clip(action, 0, n - 1).astype(action.dtype)


_INT32 = np.iinfo(np.int32)

CHECKS = ("obs", "action", "reward", "next_obs", "extras", "params")  # bit k of a lane's flags


@struct.dataclass
class CheckState:
    """Per-environment record of the first step whose values failed a check (checked mode).

    Elementwise over environments, so the fused kernel carries it like any state field.
    """

    first_step: jax.Array  # int32[num_envs]: -1 while every check has passed
    first_flags: jax.Array  # int32[num_envs]: which of CHECKS failed at first_step
    bad_steps: jax.Array  # int32[num_envs]: how many steps failed

    @classmethod
    def zeros(cls, num_envs: int) -> CheckState:
        zeros = jnp.zeros((num_envs,), jnp.int32)
        return cls(jnp.full((num_envs,), -1, jnp.int32), zeros, zeros)

    def update(self, flags, t) -> CheckState:
        bad = flags != 0
        first = bad & (self.first_step < 0)
        return CheckState(
            first_step=jnp.where(first, t, self.first_step),
            first_flags=jnp.where(first, flags, self.first_flags),
            bad_steps=self.bad_steps + bad.astype(jnp.int32),
        )


def _lane_bad(x, batch_shape):
    """int32[batch]: 1 where a [batch, ...] float array holds a NaN or inf."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return jnp.zeros(batch_shape, jnp.int32)
    bad = (~jnp.isfinite(x)).astype(jnp.int32)
    return bad.reshape(*batch_shape, -1).max(axis=-1) if bad.ndim > len(batch_shape) else bad


def _compare(op, x, bound):
    """`op(x, bound)` for a bound an int32 `x` cannot hold (e.g. `lt=2**31`): then constant."""
    if jnp.issubdtype(x.dtype, jnp.integer) and not _INT32.min <= bound <= _INT32.max:
        return jnp.full(x.shape, bool(getattr(np, op.__name__)(0, bound)))
    return op(x, bound)


def bad_param_lanes(spec_list, params, params_axes, batch_shape) -> jax.Array:
    """bool[batch]: True where an environment's params break their declarations (traced values).

    What `Spec.check` refuses on the host, computed on the device for checked mode: a float
    that is not finite, a value outside the declared bounds. Shared leaves count for every lane.
    """
    bad = jnp.zeros(batch_shape, bool)
    for spec in spec_list:
        if spec.kind is str:
            continue
        x = jnp.asarray(getattr(params, spec.name))
        wrong = (
            ~jnp.isfinite(x) if jnp.issubdtype(x.dtype, jnp.floating) else jnp.zeros_like(x, bool)
        )
        for bound, op in ((spec.ge, jnp.less), (spec.gt, jnp.less_equal)):
            if bound is not None:
                wrong |= _compare(op, x, bound)
        for bound, op in ((spec.le, jnp.greater), (spec.lt, jnp.greater_equal)):
            if bound is not None:
                wrong |= _compare(op, x, bound)
        per_env = getattr(params_axes, spec.name) == 0
        lead = len(batch_shape) if per_env else 0
        if wrong.ndim > lead:  # an array-valued field: any bad component spoils the lane
            wrong = wrong.reshape(*wrong.shape[:lead], -1).any(axis=-1)
        bad |= jnp.broadcast_to(wrong, batch_shape)
    return bad


def check_flags(env, obs, action, extras, record, params=None, params_axes=None) -> jax.Array:
    """int32[batch]: bit k set where CHECKS[k] failed this step.

    `obs` and `record["next_obs"]` are observation components; a Discrete action fails outside
    {0, ..., n - 1}, a Box action when not finite; `extras` (a policy's log-probabilities,
    values...) fail when not finite; `params` (this step's, per-episode draws included) fail
    outside their declarations, as `make` would refuse them. Whatever `outputs=` keeps,
    everything is checked.
    """
    shape = jnp.shape(record["reward"])
    space = env.action_space(env.default_params)
    if hasattr(space, "n"):
        bad_action = ((action < 0) | (action >= space.n)).astype(jnp.int32)
    else:
        bad_action = _lane_bad(action, shape)
    bad = {
        "obs": functools.reduce(jnp.maximum, [_lane_bad(c, shape) for c in obs]),
        "action": bad_action,
        "reward": _lane_bad(record["reward"], shape),
        "next_obs": functools.reduce(
            jnp.maximum, [_lane_bad(c, shape) for c in record["next_obs"]]
        ),
        "extras": functools.reduce(
            jnp.maximum,
            [_lane_bad(x, shape) for x in jax.tree.leaves(extras)],
            jnp.zeros(shape, jnp.int32),
        ),
    }
    if params is None:
        bad["params"] = jnp.zeros(shape, jnp.int32)
    else:
        spec_list = params_lib.specs(env.params_type)
        bad["params"] = bad_param_lanes(spec_list, params, params_axes, shape).astype(jnp.int32)
    return sum(bad[name] << k for k, name in enumerate(CHECKS))


def raise_on_failure(checks: CheckState, action_space) -> None:
    """Raises for the first failing (step, environment), in step-major order, if any.

    FloatingPointError for a non-finite value, ValueError for an out-of-range Discrete action
    alone; the message names what failed, the step, the environment and how many pairs failed.
    """
    if isinstance(checks.first_step, jax.core.Tracer):
        raise ValueError("rollout: checks=True needs concrete values; call rollout outside jit")
    # On a multi-host mesh each process holds part of the batch: gather it (every process
    # raises the same error).
    first = to_host(checks.first_step)
    failed = first >= 0
    if not failed.any():
        return
    step = int(first[failed].min())
    env = int(np.flatnonzero(first == step)[0])
    flags = int(to_host(checks.first_flags)[env])
    which = [name for k, name in enumerate(CHECKS) if flags >> k & 1]
    count = int(to_host(checks.bad_steps).sum())
    where = f"at step {step}, environment {env} (first of {count} bad (step, env) pairs)"
    if "params" in which:  # the cause of whatever else went wrong with them
        also = [name for name in which if name != "params"]
        raise ValueError(
            f"rollout: params outside their declared ranges (or not finite) {where}, as make() "
            "would refuse them; env.params_type's fields declare the ranges"
            + (f"; non-finite {', '.join(also)} followed" if also else "")
        )
    if which == ["action"] and hasattr(action_space, "n"):
        raise ValueError(
            f"rollout: the policy chose an action outside {action_space} {where}; unchecked, "
            "such an action is clipped to the nearest valid one"
        )
    raise FloatingPointError(f"rollout: non-finite {', '.join(which)} {where}")
