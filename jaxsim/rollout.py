"""`jaxsim.rollout(env, policy, n)`: batched experience with same-step auto-reset."""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxsim import rng
from jaxsim.core import Env
from jaxsim.policies import OpenLoopPolicy, random_policy
from jaxsim.spaces import Space

BACKENDS = ("auto", "scan", "fused")

# What `rollout(..., outputs=...)` can keep. Writing the trajectory back is most of the memory
# traffic once stepping is fused, so callers keep only what they use; `final_state` is always kept.
STEP_OUTPUTS = (
    "obs",
    "action",
    "reward",
    "terminated",
    "truncated",
    "next_obs",
    "extras",
    "episode_return",
    "episode_length",
)
OUTPUT_PRESETS = {
    "all": STEP_OUTPUTS,
    "rewards": ("reward", "terminated", "truncated"),
    "stats": ("episode_stats",),
}


@struct.dataclass
class RolloutState:
    """Where a batch of environments stands between steps; pass it back as `state=`.

    Leaves have leading shape [num_envs]. `episode_return` and `episode_length` accumulate the
    episode in progress, so statistics of episodes that straddle two rollouts come out whole.
    """

    env_state: Any
    obs: jax.Array
    episode_return: jax.Array  # float32[num_envs]
    episode_length: jax.Array  # int32[num_envs]

    @property
    def num_envs(self) -> int:
        return self.obs.shape[0]


@struct.dataclass
class EpisodeStats:
    """Statistics of the episodes that ended inside a rollout (jittable; zeros if none ended)."""

    count: jax.Array
    mean_return: jax.Array
    std_return: jax.Array
    mean_length: jax.Array


@struct.dataclass
class Trajectory:
    """A rollout's experience. Per-step leaves have leading shape [n, num_envs].

    `next_obs[t]` is the true next observation, taken before auto-reset: on a step that ends an
    episode it is the terminal observation and `obs[t + 1]` is the fresh reset one.
    `episode_return[t]` and `episode_length[t]` are the running totals of the episode including
    step t; where `done[t]` they are the finished episode's return and length.

    A per-step field that `rollout(..., outputs=...)` left out is None. `stats` holds the episode
    statistics when "episode_stats" was asked for (computed without keeping the per-step fields).
    """

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    next_obs: jax.Array
    extras: Any
    episode_return: jax.Array
    episode_length: jax.Array
    final_state: RolloutState
    stats: EpisodeStats | None = None

    @property
    def done(self) -> jax.Array:
        return self.terminated | self.truncated

    def episode_stats(self) -> EpisodeStats:
        if self.stats is not None:
            return self.stats
        done = self.done
        count = done.sum()
        denom = jnp.maximum(count, 1)
        mean = jnp.where(done, self.episode_return, 0.0).sum() / denom
        var = jnp.where(done, (self.episode_return - mean) ** 2, 0.0).sum() / denom
        mean_length = jnp.where(done, self.episode_length, 0).sum() / denom
        return EpisodeStats(count, mean, jnp.sqrt(var), mean_length)

    def finished_episodes(self) -> tuple[np.ndarray, np.ndarray]:
        """(returns, lengths) of every episode that ended, in step-major order, on the host."""
        done = np.asarray(self.done)
        return np.asarray(self.episode_return)[done], np.asarray(self.episode_length)[done]


# ------------------------------------------------------------------------------- input checking
def _check_positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"rollout: {name} must be an integer >= 1, got {value!r}")
    return int(value)


def _check_key(key) -> jax.Array:
    if key is None:
        return jax.random.key(0)
    if isinstance(key, jax.Array | np.ndarray):
        if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) and key.shape == ():
            return key
        if key.dtype == np.uint32 and key.shape == (2,):
            return key
    raise ValueError(
        "rollout: key must be one PRNG key (jax.random.key(seed) or jax.random.PRNGKey(seed)), "
        f"got {getattr(key, 'dtype', type(key).__name__)}{getattr(key, 'shape', '')}"
    )


def _batch_sizes(tree) -> set[int]:
    return {leaf.shape[0] if leaf.ndim else -1 for leaf in jax.tree.leaves(tree)}


def _check_state(env: Env, state, num_envs: int | None, params) -> RolloutState | None:
    if state is None:
        return None
    if isinstance(state, env.state_type):
        state = RolloutState(
            env_state=state,
            obs=jax.vmap(env.observe, in_axes=(0, None))(state, params),
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
    if num_envs is not None and size != num_envs:
        raise ValueError(f"rollout: state holds {size} environments but num_envs={num_envs}")
    return state


def _check_action(space: Space, action, num_envs: int) -> None:
    expected = (num_envs, *space.shape)
    if action.shape != expected or action.dtype != space.dtype:
        raise ValueError(
            f"rollout: policy returned an action of shape {tuple(action.shape)} and dtype "
            f"{action.dtype}; the action space {space} with num_envs={num_envs} needs shape "
            f"{expected} and dtype {jnp.dtype(space.dtype).name}"
        )


def _check_outputs(outputs) -> tuple[str, ...]:
    """A preset name or a collection of names -> the names, in `STEP_OUTPUTS` order."""
    valid = (*STEP_OUTPUTS, "episode_stats")
    if isinstance(outputs, str):
        if outputs not in OUTPUT_PRESETS:
            raise ValueError(
                f"rollout: unknown outputs preset {outputs!r}; presets are "
                f"{sorted(OUTPUT_PRESETS)}, or give a collection of names from {valid}"
            )
        return OUTPUT_PRESETS[outputs]
    try:
        names = set(outputs)
    except TypeError:
        raise TypeError(
            f"rollout: outputs must be a preset name or a collection of names, got {outputs!r}"
        ) from None
    unknown = sorted(str(x) for x in names - set(valid))
    if unknown:
        raise ValueError(f"rollout: unknown outputs {unknown}; valid names are {valid}")
    return tuple(x for x in valid if x in names)


def _split_policy_output(out):
    if isinstance(out, tuple):
        if len(out) != 2:
            raise ValueError(
                f"rollout: policy must return action or (action, extras), got a {len(out)}-tuple"
            )
        return out
    return out, {}


# --------------------------------------------------------------------------------- policy as args
# A policy may be a plain function (static: part of the compile-cache key) or a pytree callable
# holding arrays, e.g. network weights: its arrays are passed as arguments, so new weights of the
# same shapes reuse the compiled rollout.
def _is_array(x) -> bool:
    return isinstance(x, jax.Array | np.ndarray)


def _partition(tree):
    leaves, treedef = jax.tree.flatten(tree)
    dynamic = [leaf if _is_array(leaf) else None for leaf in leaves]
    static = tuple(None if _is_array(leaf) else leaf for leaf in leaves)
    return dynamic, (treedef, static)


def _combine(dynamic, static):
    treedef, static_leaves = static
    leaves = [d if s is None else s for d, s in zip(dynamic, static_leaves, strict=True)]
    return jax.tree.unflatten(treedef, leaves)


# ------------------------------------------------------------------------------------ scan backend
def _tree_where(cond, a, b):
    def select(x, y):
        c = cond.reshape(cond.shape + (1,) * (x.ndim - cond.ndim))
        return jnp.where(c, x, y)

    return jax.tree.map(select, a, b)


def initial_state(env: Env, key: jax.Array, num_envs: int, params) -> RolloutState:
    """The batch a rollout starts from when given no state: env i reset at counter 0."""
    seed = rng.seed_from_key(jax.random.split(key, 3)[0])
    index = jnp.arange(num_envs, dtype=jnp.uint32)
    env_state, obs = jax.vmap(env.reset_at, in_axes=(None, 0, None, None))(seed, index, 0, params)
    zeros = jnp.zeros((num_envs,), jnp.float32)
    return RolloutState(env_state, obs, zeros, jnp.zeros((num_envs,), jnp.int32))


def _scan_rollout(env, policy_static, n, num_envs, policy_dynamic, key, params, state):
    policy = _combine(policy_dynamic, policy_static)
    # Shapes and dtypes never depend on params values, which may be traced here.
    space = env.action_space(env.default_params)
    k_reset, k_policy, k_step = jax.random.split(key, 3)
    seed = rng.seed_from_key(k_reset)
    index = jnp.arange(num_envs, dtype=jnp.uint32)
    if state is None:
        state = initial_state(env, key, num_envs, params)
    # Loop-invariant halves of the reset draws: each step then costs one hash per uniform.
    reset_keys = [
        rng.stream_key(seed, index, rng.RESET_STREAM + j) for j in range(env.num_reset_uniforms)
    ]
    step_in_axes = (0 if env.stochastic else None, 0, 0, None)
    # Per-step policy keys (and, for counter-based policies, their seeds) are drawn before the
    # loop: on the CPU each threefry call in the body is a rolled loop costing about a microsecond.
    steps = jnp.arange(n, dtype=jnp.int32)
    policy_keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(k_policy, steps)
    seeded = getattr(policy, "act_from_seed", None)
    open_loop = isinstance(policy, OpenLoopPolicy)
    if open_loop:  # step t plays actions[t]; rollout checked their shape and dtype
        policy_inputs = policy.actions[:n]
    else:
        policy_inputs = jax.vmap(rng.seed_from_key)(policy_keys) if seeded else policy_keys

    def body(carry: RolloutState, xs):
        t, policy_input = xs
        with jax.named_scope("policy"):
            if open_loop:
                out = policy_input
            elif seeded:
                out = seeded(policy_input, index, carry.obs)
            else:
                out = policy(policy_input, carry.obs)
            action, extras = _split_policy_output(out)
            _check_action(space, action, num_envs)
        with jax.named_scope("env_step"):
            step_key = jax.random.fold_in(k_step, t)
            if env.stochastic:
                step_key = jax.random.split(step_key, num_envs)
            env_state, ts = jax.vmap(env.step, in_axes=step_in_axes)(
                step_key, carry.env_state, action, params
            )
        with jax.named_scope("auto_reset"):
            done = ts.terminated | ts.truncated
            episode_return = carry.episode_return + ts.reward
            episode_length = carry.episode_length + 1
            counter = (t + 1).astype(jnp.uint32)
            u = tuple(rng.to_uniform(rng.bits_from_stream_key(k, counter)) for k in reset_keys)
            reset_state = jax.vmap(env.init_state, in_axes=(0, None))(u, params)
            env_state = _tree_where(done, reset_state, env_state)
            next_carry = RolloutState(
                env_state=env_state,
                # Observing the selected state, rather than selecting between two observations,
                # keeps XLA from duplicating the step's fusion into the select (measured ~2x).
                obs=jax.vmap(env.observe, in_axes=(0, None))(env_state, params),
                episode_return=jnp.where(done, 0.0, episode_return),
                episode_length=jnp.where(done, 0, episode_length),
            )
        record = dict(
            obs=carry.obs,
            action=action,
            reward=ts.reward,
            terminated=ts.terminated,
            truncated=ts.truncated,
            next_obs=ts.obs,
            extras=extras,
            episode_return=episode_return,
            episode_length=episode_length,
        )
        return next_carry, record

    with jax.named_scope("rollout"):
        final_state, rec = jax.lax.scan(body, state, (steps, policy_inputs))
    return Trajectory(final_state=final_state, **rec)


_scan_rollout_jit = jax.jit(_scan_rollout, static_argnums=(0, 1, 2, 3))


def _scan_rollout_outputs(env, policy_static, n, num_envs, outputs, *args):
    """The scan backend keeping only `outputs`: the rest never leaves the jitted function."""
    traj = _scan_rollout(env, policy_static, n, num_envs, *args)
    stats = traj.episode_stats() if "episode_stats" in outputs else None
    dropped = {name: None for name in STEP_OUTPUTS if name not in outputs}
    return traj.replace(stats=stats, **dropped)


_scan_rollout_outputs_jit = jax.jit(_scan_rollout_outputs, static_argnums=(0, 1, 2, 3, 4))


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
) -> Trajectory:
    """Steps `num_envs` copies of `env` for `n` steps under `policy`, auto-resetting.

    Args:
      env: a `jaxsim.Env`, e.g. `jaxsim.make("CartPole-v1")`.
      policy: `policy(key, obs[num_envs, *obs_shape]) -> action[num_envs, *action_shape]` or
        `(action, extras)`; extras (a pytree of arrays with leading num_envs) are recorded. The
        string "random" means `jaxsim.random_policy(env, params)`. A policy that is a pytree of
        arrays (e.g. a dataclass holding weights) passes them as arguments, so new weights do not
        recompile.
      n: number of steps.
      num_envs: batch size; defaults to the batch of `state`, else 1.
      key: a PRNG key for resets and the policy; defaults to `jax.random.key(0)`.
      params: the env's params (default `env.default_params`), shared by all environments.
      state: where to continue from: a previous `Trajectory.final_state` (or a batched env state).
        If None, every environment starts from a counter-based reset.
      backend: "scan" (`lax.scan` over vmapped steps: any environment and policy), "fused" (a
        Pallas kernel running many steps and the policy per launch; see `jaxsim.fused` for
        what it runs), or "auto": "fused" on a GPU where the environment and policy support it,
        else "scan". On a CPU the kernel runs in Pallas interpret mode, which is for tests.
      outputs: what to keep: "all" (every per-step field), "rewards" (reward, terminated,
        truncated), "stats" (episode statistics only), or a collection of per-step field names
        and/or "episode_stats". Left-out fields are None; "episode_stats" fills
        `Trajectory.stats`. Both backends honour it; the fused one writes nothing else back.
      fused_config: a `jaxsim.fused.FusedConfig` (environments per block, steps per launch);
        None for its defaults. Used by the fused backend only.
      checks: if True, raise `FloatingPointError` naming the first step and environment whose
        observation or reward is NaN or inf. Needs concrete inputs (not under `jit`).

    Returns:
      A `Trajectory` whose per-step leaves have leading shape [n, num_envs], with `final_state`.
    """
    if not isinstance(env, Env):
        raise TypeError(f"rollout: env must be a jaxsim.Env (see jaxsim.make), got {env!r}")
    n = _check_positive_int("n", n)
    if num_envs is not None:
        num_envs = _check_positive_int("num_envs", num_envs)
    if backend not in BACKENDS:
        raise ValueError(f"rollout: unknown backend {backend!r}; valid backends are {BACKENDS}")
    params = env.default_params if params is None else params
    if not isinstance(params, env.params_type):
        raise TypeError(
            f"rollout: params must be {env.params_type.__name__} for {env.id} "
            f"(env.default_params), got {type(params).__name__}"
        )
    key = _check_key(key)
    outputs = _check_outputs(outputs)
    if isinstance(policy, str):
        if policy != "random":
            raise ValueError(f"rollout: the only named policy is 'random', got {policy!r}")
        policy = random_policy(env, params)
    if not callable(policy):
        raise TypeError(f"rollout: policy must be callable, got {type(policy).__name__}")
    state = _check_state(env, state, num_envs, params)
    if num_envs is None:
        num_envs = state.num_envs if state is not None else 1

    from jaxsim import fused  # deferred: it loads Pallas, and it imports this module

    if backend == "auto":
        backend = fused.auto_backend(env, policy)
    if backend == "fused":
        traj = fused.fused_rollout(
            env, policy, n, num_envs=num_envs, key=key, params=params, state=state,
            outputs=outputs, config=fused_config,
        )  # fmt: skip
    else:
        if isinstance(policy, OpenLoopPolicy):
            policy.check(env.action_space(env.default_params), n, num_envs)
        policy_dynamic, policy_static = _partition(policy)
        args = (policy_dynamic, key, params, state)
        if outputs == STEP_OUTPUTS:
            traj = _scan_rollout_jit(env, policy_static, n, num_envs, *args)
        else:
            traj = _scan_rollout_outputs_jit(env, policy_static, n, num_envs, outputs, *args)
    if checks:
        _raise_on_nonfinite(traj)
    return traj


def _raise_on_nonfinite(traj: Trajectory) -> None:
    if isinstance(traj.final_state.episode_return, jax.core.Tracer):
        raise ValueError("rollout: checks=True needs concrete values; call rollout outside jit")

    def bad(x):
        x = np.asarray(x)
        return ~np.isfinite(x.reshape((*x.shape[:2], -1))).all(-1)

    fields = {"obs": traj.obs, "next_obs": traj.next_obs, "reward": traj.reward}
    fields = {name: x for name, x in fields.items() if x is not None}  # outputs= may drop them
    if not fields:
        return
    masks = {name: bad(x) for name, x in fields.items()}
    any_bad = functools.reduce(operator.or_, masks.values())
    if any_bad.any():
        t, i = np.unravel_index(np.argmax(any_bad.ravel()), any_bad.shape)
        which = [name for name, m in masks.items() if m[t, i]]
        raise FloatingPointError(
            f"rollout: non-finite {', '.join(which)} at step {t}, environment {i} "
            f"(first of {int(any_bad.sum())} bad (step, env) pairs)"
        )
