"""`jaxsim.check_env`: does an environment do what it declares? The JAX counterpart of
Gymnasium's checker.

`check_env(env)` is the whole check: what `jaxsim.contract.check_outputs` checks cheaply (what
the environment returns against what it declares), then reset and step under `jit` and `vmap`,
the same draws giving the same trajectory and other draws another start (a reset that declares
draws and ignores them is named), the time limit truncating, auto-reset returning the true final
observation, and the scan and fused backends agreeing bit for bit where the fused kernel runs
the environment (where it cannot, `CheckReport.fused` says why).

Every message names the method, the field, what it returned and what was declared.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim import envs
from jaxsim.contract import EnvCheckError, output_problems
from jaxsim.core import Env
from jaxsim.fused.config import FusedConfig, unsupported_reason
from jaxsim.rollout import _check_positive_int, rollout


@dataclasses.dataclass(frozen=True)
class CheckReport:
    """What `check_env` found on an environment that passed it."""

    env_id: str
    checks: tuple[str, ...]  # the checks that ran and passed, in order
    fused: str | None  # why the fused backend cannot run it, or None: it ran and agreed


# ------------------------------------------------------------------------------- the whole check
def check_env(env, *, num_envs: int = 16, steps: int = 8) -> CheckReport:
    """Checks `env` against its declarations and the library's contract; see the module doc.

    Args:
      env: a `jaxsim.Env`, or an id for `jaxsim.make`.
      num_envs, steps: the small batch and rollout length the dynamic checks run (at least 4
        steps: the time-limit check truncates at 3).

    Returns:
      A `CheckReport` (the checks that passed; why the fused backend cannot run it, if not).

    Raises:
      EnvCheckError: listing every problem found, each naming the method and field.
    """
    num_envs = _check_positive_int("num_envs", num_envs, "check_env")
    steps = _check_positive_int("steps", steps, "check_env")  # named, before any work
    if isinstance(env, str):
        env = envs.make(env)
    if not isinstance(env, Env):
        raise TypeError(f"check_env: env must be a jaxsim.Env or an id, got {type(env).__name__}")
    problems = output_problems(env)
    if problems:
        raise EnvCheckError(env.id, problems)
    done = ["outputs match the declared spaces and dtypes", "params defaults in range"]
    params = env.default_params
    obs_space, act_space = env.observation_space(params), env.action_space(params)
    keys = jax.random.split(jax.random.key(0), num_envs)

    # jit and vmap
    reset = jax.jit(jax.vmap(env.reset, (0, None)))  # one program for both resets below
    try:
        states, obs = reset(keys, params)
        actions = jax.vmap(act_space.sample)(jax.random.split(jax.random.key(1), num_envs))
        _, ts = jax.jit(jax.vmap(env.step, (0, 0, 0, None)))(keys, states, actions, params)
    except Exception as err:
        raise EnvCheckError(env.id, [f"reset/step under jit(vmap(...)): {err}"]) from err
    jax.block_until_ready(ts)
    if not bool(jnp.all(jnp.isfinite(ts.reward))):
        problems.append(f"step: reward {np.asarray(ts.reward)} is not finite")
    if not bool(jax.vmap(obs_space.contains)(obs).all()):
        problems.append(
            f"reset: an observation lies outside observation_space {obs_space} "
            f"(first: {np.asarray(obs[0]).ravel()[:8]})"
        )
    done.append("reset and step under jit and vmap")

    # draws: the same ones replay, other ones start elsewhere
    again, _ = reset(keys, params)
    if not _tree_equal(states, again):
        problems.append("reset: the same key gave different states (the reset is not pure)")
    if env.draws.reset != 0 and env.draws.reset != ():
        leaves = [np.asarray(x) for x in jax.tree.leaves(states)]
        if all(np.all(x == x[:1]) for x in leaves):
            problems.append(
                f"init_state: declares draws.reset={env.draws.reset!r} but {num_envs} resets "
                "from different keys gave the same state (the reset ignores its randomness)"
            )
    done.append("same draws replay; other draws differ")

    # the time limit truncates, and auto-reset keeps the true final observation. Every rollout
    # here has one length and key: the fused backend is compared with `long_run` itself, so a
    # check compiles one scan program fewer (seconds for a large environment).
    limit = 3
    length = max(steps, limit + 1)
    short = params.replace(max_episode_steps=limit)  # a Python int, as the default: one program
    kwargs = dict(num_envs=num_envs, key=jax.random.key(2))
    long_run = rollout(env, "random", length, backend="scan", **kwargs)
    short_run = rollout(env, "random", length, params=short, backend="scan", **kwargs)
    alive = ~np.asarray(long_run.terminated[: limit - 1]).any(axis=0)
    trunc = np.asarray(short_run.truncated[limit - 1])
    if not trunc[alive].all() or np.asarray(short_run.truncated[: limit - 1]).any():
        problems.append(
            f"step: with max_episode_steps={limit}, truncated was {trunc.tolist()} at step "
            f"{limit} (expected True wherever the episode had not terminated)"
        )
    same = _equal(long_run.next_obs[limit - 1], short_run.next_obs[limit - 1])[alive]
    if not same.all():
        problems.append(
            "auto-reset: next_obs at a truncation is not the true final observation (it differs "
            "from the same episode's observation without the limit)"
        )
    done.append("the time limit truncates; auto-reset keeps the final observation")

    # scan == fused, where the kernel runs it
    fused = unsupported_reason(env)
    if fused is None and not problems:  # compared once the environment is otherwise sound
        config = FusedConfig(block_envs=num_envs, steps_per_launch=max(1, length // 2))
        fused_run = rollout(env, "random", length, backend="fused", fused_config=config, **kwargs)
        for field in ("obs", "reward", "terminated", "truncated", "next_obs"):
            a, b = (np.asarray(getattr(r, field)) for r in (long_run, fused_run))
            if not np.array_equal(a, b):
                problems.append(f"fused backend: {field} differs from the scan backend's")
        done.append("scan == fused bit for bit")
    if problems:
        raise EnvCheckError(env.id, problems)
    return CheckReport(env.id, tuple(done), fused)


def _equal(a, b) -> np.ndarray:
    """Per environment (leading axis): every element equal."""
    a, b = np.asarray(a), np.asarray(b)
    return (a == b).reshape(a.shape[0], -1).all(axis=1)


def _tree_equal(a, b) -> bool:
    return all(
        np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )
