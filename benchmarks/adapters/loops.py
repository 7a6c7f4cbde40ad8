"""The loops the adapters suite times: `jaxsim.rollout` through an adapter, the library's own
jitted loop beside it, and Gymnasium's MuJoCo Ant on the CPU.

Every JAX loop is a `Runner`: one call steps `num_envs` environments `steps` times inside one
jit, continuing from where the previous call stopped (episodes straddle calls, as in training),
and returns (reward, done, truncated), each [steps, num_envs]. A runner keeps every call's flags
so that `episode_check` can follow each environment's episodes through the whole run after the
timing, where it costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

import jaxsim
from benchmarks.harness.gymnax_scan import gymnax_scan
from benchmarks.harness.optional import require
from benchmarks.harness.timing import chained
from jaxsim.envs.adapters import strong_types


class Runner:
    """A chained loop: `runner()` runs one call; `history` holds every call's outputs."""

    def __init__(self, name: str, num_envs: int, steps: int, call: Callable[[], Any]):
        self.name, self.num_envs, self.steps = name, num_envs, steps
        self._call = call  # () -> (reward, done, truncated), each [steps, num_envs] (`chained`)
        self.history: list[tuple[jax.Array, ...]] = []

    def __call__(self):
        out = self._call()
        self.history.append(out)  # device arrays: no copy, no wait
        return out


# ---------------------------------------------------------------------------------------- jaxsim
def jaxsim_runner(env, policy, num_envs: int, steps: int) -> Runner:
    """`jaxsim.rollout(..., outputs="rewards")` chained through `final_state`: the public call,
    its argument checks included, on the scan backend (the one adapters run on)."""
    keys = jax.random.split(jax.random.key(0), num_envs)
    state, _ = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys, env.default_params)

    def call(state, key):
        traj = jaxsim.rollout(
            env,
            policy,
            steps,
            num_envs=num_envs,
            key=key,
            state=state,
            outputs="rewards",
            backend="scan",
        )
        return traj.final_state, (traj.reward, traj.terminated | traj.truncated, traj.truncated)

    return Runner("jaxsim", num_envs, steps, chained(call, state))


# ------------------------------------------------------------------------------------------ brax
def brax_env(name: str, backend: str | None):
    envs = require("brax.envs")
    return envs.get_environment(name, **({"backend": backend} if backend else {}))


def brax_runner(
    name: str, backend: str | None, policy, num_envs: int, steps: int, episode_length: int
) -> Runner:
    """brax's own loop: jit(scan(step)) of `brax.envs.training.wrap(env, episode_length)`
    (VmapWrapper, EpisodeWrapper, AutoResetWrapper), as brax's PPO and SAC step it."""
    training = require("brax.envs.wrappers.training")
    env = training.wrap(brax_env(name, backend), episode_length=episode_length)
    # brax's EpisodeWrapper reads the batch off raw uint32 keys [N, 2].
    keys = jax.random.split(jax.random.PRNGKey(0), num_envs)

    @jax.jit
    def run(state, key):
        def body(carry, _):
            state, key = carry
            key, k_act = jax.random.split(key)
            state = env.step(state, policy(k_act, state.obs))
            flags = (state.done > 0.5, state.info["truncation"] > 0.5)
            return (state, key), (state.reward, *flags)

        (state, _), out = jax.lax.scan(body, (state, key), None, length=steps)
        # brax's step gives weakly typed leaves where its reset gave strong ones: without this
        # the second call would compile again, for the other type.
        return strong_types(state), out

    return Runner("brax", num_envs, steps, chained(run, jax.jit(env.reset)(keys)))


# ---------------------------------------------------------------------------------------- gymnax
def gymnax_runner(name: str, policy, num_envs: int, steps: int) -> Runner:
    """gymnax's own loop (`harness.gymnax_scan`), keeping (reward, done, truncated)."""
    run, carry = gymnax_scan(
        name, num_envs, steps, lambda obs, r, term, trunc: (r, term | trunc, trunc), policy
    )
    return Runner("gymnax", num_envs, steps, chained(run, carry))


# ----------------------------------------------------------------------------------------- checks
def episode_check(runner: Runner, limit: int) -> dict[str, Any]:
    """Follows every environment's episodes through all of `runner`'s calls, in order.

    Checks that rewards are finite, that no episode outlasts `limit` steps, and that each
    truncation falls exactly at `limit`. Raises AssertionError naming the first failure.

    Returns:
      what was seen: steps, episodes ended, truncations, the longest episode, and the share of
      steps on which some environment of the batch was done (where jaxsim's reset runs).
    """
    since = np.zeros(runner.num_envs, np.int64)  # steps into each environment's episode
    ended = truncations = longest = steps = reset_steps = 0
    for call, (reward, done, truncated) in enumerate(runner.history):
        reward, done, truncated = (np.asarray(x) for x in (reward, done, truncated))
        if reward.shape != (runner.steps, runner.num_envs) or not np.isfinite(reward).all():
            raise AssertionError(f"{runner.name}: call {call}: rewards {reward.shape} not finite")
        for t in range(runner.steps):
            since += 1
            if since.max() > limit:
                raise AssertionError(f"{runner.name}: an episode outlasted the limit {limit}")
            if (since[truncated[t]] != limit).any():
                raise AssertionError(f"{runner.name}: truncated before the limit {limit}")
            longest = max(longest, int(since[done[t]].max(initial=0)))
            ended += int(done[t].sum())
            truncations += int(truncated[t].sum())
            reset_steps += bool(done[t].any())
            since[done[t]] = 0
        steps += runner.steps
    return {
        "pass": True,
        "steps": steps,
        "episodes_ended": ended,
        "truncations": truncations,
        "longest_episode": longest,
        "reset_step_share": reset_steps / max(steps, 1),
    }


# ------------------------------------------------------------------------------------- Gymnasium
def gymnasium_runner(env_id: str, num_envs: int, steps: int) -> Callable[[], Any]:
    """`steps` steps of Gymnasium's `env_id` with uniform random actions: one `gym.make` env
    stepped by a Python loop (num_envs 1), or a SyncVectorEnv of `num_envs` (whose default
    NEXT_STEP auto-reset spends a step per episode on the reset; those steps count, as
    Gymnasium counts them). A call returns (last observations, rewards [steps, num_envs])."""
    gym = require("gymnasium")
    rng = np.random.default_rng(0)
    if num_envs == 1:
        env = gym.make(env_id)
        env.reset(seed=0)
        low, high = env.action_space.low, env.action_space.high

        def call():
            rewards = np.empty((steps, 1))
            for t in range(steps):
                obs, rewards[t], terminated, truncated, _ = env.step(rng.uniform(low, high))
                if terminated or truncated:
                    obs, _ = env.reset()
            return obs[None], rewards

        return call
    envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync")
    envs.reset(seed=0)
    low, high = envs.action_space.low, envs.action_space.high

    def vector_call():
        rewards = np.empty((steps, num_envs))
        for t in range(steps):
            obs, rewards[t], *_ = envs.step(rng.uniform(low, high))
        return obs, rewards

    return vector_call
