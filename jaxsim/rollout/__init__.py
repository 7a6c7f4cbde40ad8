"""`jaxsim.rollout(env, policy, n)`: batched experience with same-step auto-reset.

Stateful (recurrent) policies: a policy with a method `init_carry(num_envs) -> carry` (a pytree
of arrays with leading [num_envs], e.g. a GRU's hidden state) is called as
`policy(key, obs, carry) -> (action, extras, carry)`. The rollout threads each environment's
carry through the steps; after a step that ends an episode (terminated or truncated), that
environment's carry is reset to `init_carry`'s values, so the first step of every episode
sees a fresh carry. `Trajectory.policy_carry` is the carry before step 0 (what a learner
re-runs the recurrent policy from), `final_state.policy_carry` the one after step n - 1 (reset
where done), which `state=final_state` continues from. They run on the scan backend:
`backend="fused"` refuses them (ValueError), `backend="auto"` runs the scan. In checked mode
the carry is checked with the extras. Stateless policies (`policy(key, obs)`) are unchanged:
their carry fields are None.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim import fused, rng, sharding
from jaxsim import params as params_lib
from jaxsim.contract import check_outputs as check_env_outputs
from jaxsim.core import Env
from jaxsim.params_sampling import check_sampler
from jaxsim.policies import OpenLoopPolicy, random_policy
from jaxsim.rollout import spec as rollout_spec
from jaxsim.rollout.checks import check_memory, check_out, raise_on_failure
from jaxsim.rollout.scan import initial_state, scan_rollout
from jaxsim.rollout.step import is_stateful
from jaxsim.rollout.trajectory import EpisodeStats, RolloutState, Trajectory, check_outputs

__all__ = [
    "EpisodeStats",
    "RolloutState",
    "Trajectory",
    "check_rollout",
    "initial_state",
    "rollout",
]

BACKENDS = ("auto", "scan", "fused")


def check_backend(env: Env, backend, check_fused_env: bool = True) -> None:
    """Raises ValueError naming the reason if `backend` is not one of `BACKENDS`, or (with
    `check_fused_env`) is "fused" for an environment the kernel cannot run; traces no step, so
    a caller can check a configuration up front (the agents do, before anything compiles)."""
    if backend not in BACKENDS:
        raise ValueError(f"rollout: unknown backend {backend!r}; valid backends are {BACKENDS}")
    if check_fused_env and backend == "fused":
        reason = fused.unsupported_reason(env)
        if reason is not None:
            raise ValueError(fused.refusal(reason))


def check_rollout(
    env: Env,
    policy,
    n: int,
    *,
    num_envs: int = 1,
    params=None,
    backend: str = "auto",
    outputs: str | Iterable[str] = "all",
    state_given: bool = False,
) -> None:
    """Raises what `rollout` would refuse about this configuration before tracing a step: an
    unknown `backend` (or "fused" for an environment the kernel cannot run: ValueError naming
    why) and a rollout that would not fit in free memory (MemoryError, with what fits). A
    program that builds many rollouts (a training run, a sweep) checks them up front this way.

    `policy` may be None where only the backend matters (its extras are then not counted);
    `state_given`: the rollout continues from a `state=` already in memory (counted once).
    """
    check_backend(env, backend)
    n = _check_positive_int("n", n)
    num_envs = _check_positive_int("num_envs", num_envs)
    outputs = check_outputs(outputs)
    if policy is None:
        outputs = tuple(name for name in outputs if name != "extras")
    _check_stateful_backend(policy, backend)
    policy = _stateless_view(policy, num_envs)
    check_memory(env, policy, jax.random.key(0), n, num_envs, outputs, params, state_given)


def _check_stateful_backend(policy, backend: str) -> None:
    if backend == "fused" and is_stateful(policy):
        raise ValueError(
            "rollout: backend='fused' cannot run a stateful policy (one with init_carry, e.g. a "
            "recurrent one): the fused kernel does not thread a policy carry through its steps; "
            "use backend='scan' or 'auto' (which runs the scan for it)"
        )


def _stateless_view(policy, num_envs: int):
    """A stateful policy as `policy(key, obs) -> (action, extras)` from a fresh carry: what the
    memory estimate traces (the carry is not recorded per step)."""
    if not is_stateful(policy):
        return policy

    def view(key, obs):
        action, extras, _ = policy(key, obs, policy.init_carry(num_envs))
        return action, extras

    return view


def _check_policy_carry(policy, state, num_envs: int) -> None:
    """A `state=`'s policy carry against the policy: present only for a stateful policy, and of
    `init_carry(num_envs)`'s structure, shapes and dtypes."""
    carry = None if state is None else state.policy_carry
    if carry is None:
        return
    if not is_stateful(policy):
        raise ValueError(
            "rollout: state carries a policy carry (a stateful policy made it) but this policy "
            "is stateless (no init_carry); continue with the policy that made the state, or "
            "pass state.replace(policy_carry=None)"
        )
    expected = jax.eval_shape(lambda: policy.init_carry(num_envs))
    given = jax.tree.map(lambda x: jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x)), carry)
    if jax.tree.structure(expected) != jax.tree.structure(given) or jax.tree.leaves(
        expected
    ) != jax.tree.leaves(given):
        raise ValueError(
            f"rollout: state.policy_carry is {given}, but policy.init_carry(num_envs={num_envs}) "
            f"gives {expected}; continue with the policy that made the state"
        )


# ------------------------------------------------------------------------------- input checking
_MAX_COUNT = 2**31 - 1  # step counters and environment indices are int32


def _check_positive_int(name: str, value, owner: str = "rollout") -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | np.integer)
        or not 1 <= value <= _MAX_COUNT
    ):
        raise ValueError(
            f"{owner}: {name} must be an integer in [1, 2**31 - 1] (int32 counters), got {value!r}"
        )
    return int(value)


def _batch_sizes(tree) -> set[int]:
    return {leaf.shape[0] if leaf.ndim else -1 for leaf in jax.tree.leaves(tree)}


def _state_size(state) -> int | None:
    """The batch size of a `state=` argument, or None if there is none to read."""
    if isinstance(state, RolloutState):
        return state.num_envs
    time = getattr(state, "time", None)
    return time.shape[0] if getattr(time, "ndim", 0) else None


def _check_state(
    env: Env, state, num_envs: int, params, params_axes, sampler
) -> RolloutState | None:
    if state is None:
        return None
    if isinstance(state, env.state_type):
        obs = jax.vmap(env.observe, in_axes=(0, params_axes))(state, params)
        state = RolloutState(
            env_state=state,
            obs=obs,
            episode_return=jnp.zeros(state.time.shape, jnp.float32),
            episode_length=jnp.asarray(state.time, jnp.int32),
        )
    if not isinstance(state, RolloutState):
        raise TypeError(
            "rollout: state must be a previous rollout's final_state (RolloutState) or a batched "
            f"{env.state_type.__name__}, got {type(state).__name__}"
        )
    if not isinstance(state.env_state, env.state_type):
        raise TypeError(
            f"rollout: state holds a {type(state.env_state).__name__}, but {env.id} needs "
            f"{env.state_type.__name__}"
        )
    sizes = _batch_sizes(state)
    if len(sizes) != 1 or -1 in sizes:
        raise ValueError(
            f"rollout: every leaf of state must have the same leading (batch) size, got {sizes}"
        )
    (size,) = sizes
    if size != num_envs:
        raise ValueError(f"rollout: state holds {size} environments but num_envs={num_envs}")
    drawn = sorted(state.episode_params or ())
    wanted = sorted(sampler.fields) if sampler is not None else []
    if drawn != wanted:
        raise ValueError(
            f"rollout: state carries per-episode params {drawn} but params_sampler draws "
            f"{wanted}: continue a rollout with the params_sampler it was started with"
        )
    return state


# ------------------------------------------------------------------------------------- public API
def rollout(
    env: Env,
    policy,
    n: int,
    *,
    num_envs: int | None = None,
    key: jax.Array | None = None,
    params=None,
    state: RolloutState | Any | None = None,
    backend: str = "auto",
    outputs: str | Iterable[str] = "all",
    fused_config=None,
    checks: bool = False,
    params_sampler=None,
    mesh=None,
    out: Trajectory | None = None,
) -> Trajectory:
    """Steps `num_envs` copies of `env` for `n` steps under `policy`, auto-resetting.

    Args:
      env: a `jaxsim.Env`, e.g. `jaxsim.make("CartPole-v1")`.
      policy: `policy(key, obs[num_envs, *obs_shape]) -> action[num_envs, *action_shape]` or
        `(action, extras)`; extras (a pytree of arrays with leading num_envs) are recorded. The
        string "random" means `jaxsim.random_policy(env, params)`. A policy that is a pytree of
        arrays (e.g. a dataclass holding weights) passes them as arguments, so new weights do not
        recompile. A stateful policy (`init_carry`; module docstring) is called as
        `policy(key, obs, carry) -> (action, extras, carry)` on the scan backend.
      n: number of steps.
      num_envs: batch size; defaults to the batch of `state`, else 1.
      key: a PRNG key for resets and the policy. Without one, a rollout from scratch uses
        `jax.random.key(0)` and a continuation (`state=` a previous `final_state`) the key
        that state carries (`RolloutState.next_key`, derived from the key that made it), so
        consecutive chunks draw fresh actions and resets; a state made by hand needs a key.
      params: the env's params (default `env.default_params`). Each leaf has its field's
        declared shape (shared by every environment) or that shape with a leading `num_envs`
        axis (one value per environment: domain randomisation), mixed freely; a Python list
        is one array. Concrete values are checked as `make` checks them (as float32/int32),
        an error naming the field and environment, before any work. Spaces come from
        `env.default_params`; params act on the physics only.
      state: where to continue from: a previous `Trajectory.final_state` (or a batched env state).
        If None, every environment starts from a counter-based reset.
      backend: "scan" (`lax.scan` over vmapped steps: any environment and policy), "fused" (a
        Pallas kernel running many steps and the policy per launch; see `jaxsim.fused` for
        what it runs), or "auto": "fused" on a GPU where the environment and policy support it,
        else "scan". On a CPU the kernel runs in Pallas interpret mode, which is for tests.
        "auto" compiles the kernel once per configuration first; if that fails it warns once,
        naming the reason, and runs the scan (while "fused" raises the error).
      outputs: what to keep: "all" (every per-step field), "rewards" (reward, terminated,
        truncated), "stats" (episode statistics only), or a collection of per-step field names
        and/or "episode_stats". Left-out fields are None; "episode_stats" fills
        `Trajectory.stats`. Both backends honour it; the fused one writes nothing else back.
      fused_config: a `jaxsim.fused.FusedConfig` (environments per block, steps per launch);
        None for its defaults. Used by the fused backend only.
      checks: if True, check every step on the device, whatever `outputs=` keeps, and raise
        for the first step and environment that failed: `FloatingPointError` for a NaN or inf
        observation, next observation, reward or policy extra (log-probability, value...),
        `ValueError` for a Discrete action outside the space (unchecked, such an action is
        clipped to the nearest valid one) or for params outside their declared ranges (traced
        ones, e.g. a hand-written sampler's draws; concrete params are refused up front).
        The trajectory keeps the per-environment record in `checks`. Needs concrete inputs
        (not under `jit`).
      params_sampler: draws params fields afresh for every episode, e.g.
        `jaxsim.uniform_params(env, gravity=(9.0, 10.5))`: at each auto-reset (and at the
        start) environment i draws `params_sampler.draw(seed, i, counter)` with counter-based
        randomness, overriding those fields of `params` for the episode. The fields drawn for
        the episodes in progress travel in `final_state.episode_params`.
      mesh: a `jax.sharding.Mesh` with an axis named `jaxsim.ENV_AXIS` ("envs"): the batch is
        split over that axis (num_envs must be a multiple of its size); other axes hold copies.
        Outputs come back split the same way ([n, num_envs] leaves on axis 1, `final_state` on
        axis 0), so `state=final_state` continues on the mesh. Environments keep their global
        indices, so every draw is the unsharded rollout's; on the CPU the native
        environments' per-step values are the unsharded ones bit for bit (an MLP policy's
        extras within the last bit), except CartPole with a shared total mass (<= 6e-5 after
        500 steps: give `masspole` per environment for bit equality; README), and sums over
        the batch (episode statistics) add in another order. Multi-host meshes
        (`jax.distributed`) work alike.
      out: an earlier rollout's `Trajectory` (same n, num_envs, outputs, extras) whose per-step
        buffers are donated (deleted) and written with this rollout's values; scan backend only.

    Returns:
      A `Trajectory` whose per-step leaves have leading shape [n, num_envs], with `final_state`.
    """
    if not isinstance(env, Env):
        raise TypeError(f"rollout: env must be a jaxsim.Env (see jaxsim.make), got {env!r}")
    n = _check_positive_int("n", n)
    if num_envs is not None:
        num_envs = _check_positive_int("num_envs", num_envs)
    check_backend(env, backend, check_fused_env=False)
    check_env_outputs(env)  # its outputs against its spaces, once per class: before any work
    params = env.default_params if params is None else params
    if not isinstance(params, env.params_type):
        raise TypeError(
            f"rollout: params must be {env.params_type.__name__} for {env.id} "
            f"(env.default_params), got {type(params).__name__}"
        )
    params = params_lib.as_arrays(params)
    if key is not None:
        key = rng.check_key("rollout", key)
    outputs = check_outputs(outputs)
    if checks not in (True, False):
        raise TypeError(f"rollout: checks must be True or False, got {checks!r}")
    checks = bool(checks)
    if isinstance(policy, str):
        if policy != "random":
            raise ValueError(f"rollout: the only named policy is 'random', got {policy!r}")
        policy = random_policy(env)
    if not callable(policy):
        raise TypeError(f"rollout: policy must be callable, got {type(policy).__name__}")
    stateful = is_stateful(policy)
    _check_stateful_backend(policy, backend)
    if num_envs is None:
        num_envs = _state_size(state) or 1
    if mesh is not None:
        mesh = sharding.check_mesh(mesh, num_envs)
        sharding.check_placement(mesh, "rollout", params=params, state=state, policy=policy)
    params_axes = env.params_axes(params, num_envs)
    check_sampler("rollout", env, params_sampler, num_envs)
    state = _check_state(env, state, num_envs, params, params_axes, params_sampler)
    _check_policy_carry(policy, state, num_envs)
    if key is None:
        key = rng.continuation_key(state)
    if state is not None:  # read above only: a raw env state (none) and a final_state compile once
        state = state.replace(next_key=None)

    auto = backend == "auto"
    if auto:
        backend = "scan" if stateful else fused.auto_backend(env, policy)
    into = None if out is None else check_out(env, out, n, num_envs, outputs, backend, auto, mesh)
    kept = outputs if into is None else ()  # out= holds the outputs already: no new memory
    memory_policy = _stateless_view(policy, num_envs)
    check_memory(env, memory_policy, key, n, num_envs, kept, params, state is not None)
    spec, inputs = rollout_spec.make(
        env, n, num_envs, outputs, checks, key, params, state,
        params_sampler=params_sampler, mesh=mesh, params_axes=params_axes,
    )  # fmt: skip
    if backend == "fused":
        from jaxsim.fused.compile_once import KernelCompileError
        from jaxsim.fused.driver import run_fused

        try:
            traj = run_fused(spec, policy, inputs, fused_config, auto=auto)
        except KernelCompileError as err:  # only with auto: the user never asked for the kernel
            if err.first:
                warnings.warn(
                    f"rollout: backend='auto' runs the scan backend: the fused kernel failed to "
                    f"compile for {env.id} ({err.reason}); backend='fused' raises this error",
                    RuntimeWarning,
                    stacklevel=2,
                )
            backend = "scan"
    if backend == "scan":
        if isinstance(policy, OpenLoopPolicy):
            policy.check(env.action_space(env.default_params), n, num_envs)
        policy_dynamic, policy_static = rollout_spec.partition(policy)
        traj = scan_rollout(
            spec.replace(policy=policy_static), inputs.replace(policy=policy_dynamic), into
        )
    if checks:
        raise_on_failure(traj.checks, env.action_space(env.default_params))
    final_state = traj.final_state.replace(next_key=rng.continuation_keys(key, num_envs, mesh))
    return traj.replace(final_state=final_state)
