"""What a rollout returns: `Trajectory`, `RolloutState`, `EpisodeStats`, and which outputs it keeps.

Every backend fills these types; `jaxsim.rollout.step` builds on them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization, struct

from jaxsim.sharding import to_host

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


def check_outputs(outputs) -> tuple[str, ...]:
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


# ------------------------------------------------------------------------------- episode statistics
@struct.dataclass
class EpisodeStats:
    """Statistics of the episodes that ended inside a rollout (jittable; zeros if none ended)."""

    count: jax.Array
    mean_return: jax.Array
    std_return: jax.Array
    mean_length: jax.Array


@struct.dataclass
class EpisodeSums:
    """Per-environment running statistics of finished episodes (Welford), merged by Chan's rule.

    Elementwise over environments, so the fused kernel keeps them in registers. Welford's update
    avoids the cancellation of E[x^2] - mean^2 on long runs with large returns.
    """

    count: jax.Array  # int32[num_envs]
    mean: jax.Array  # float32[num_envs]: mean return of this environment's finished episodes
    m2: jax.Array  # float32[num_envs]: sum of squared deviations from `mean`
    length_sum: jax.Array  # int32[num_envs]

    @classmethod
    def zeros(cls, num_envs: int) -> EpisodeSums:
        i, f = jnp.zeros((num_envs,), jnp.int32), jnp.zeros((num_envs,), jnp.float32)
        return cls(i, f, f, i)

    def add(self, done, episode_return, episode_length) -> EpisodeSums:
        count = self.count + done.astype(jnp.int32)
        delta = episode_return - self.mean
        mean = self.mean + jnp.where(done, delta / jnp.maximum(count, 1).astype(jnp.float32), 0.0)
        m2 = self.m2 + jnp.where(done, delta * (episode_return - mean), 0.0)
        length_sum = self.length_sum + jnp.where(done, episode_length, 0)
        return EpisodeSums(count, mean, m2, length_sum)

    def stats(self, axis_name: str | None = None) -> EpisodeStats:
        """Every environment's statistics merged (Chan et al.'s parallel formula).

        `axis_name`: inside `shard_map`, the mesh axis whose shards hold the rest of the batch
        (their sums are added with `psum`).
        """

        def total(x):
            x = x.sum()
            return x if axis_name is None else jax.lax.psum(x, axis_name)

        count = total(self.count)
        n = self.count.astype(jnp.float32)
        denom = jnp.maximum(count, 1).astype(jnp.float32)
        mean = total(n * self.mean) / denom
        m2 = total(self.m2) + total(n * (self.mean - mean) ** 2)
        return EpisodeStats(count, mean, jnp.sqrt(m2 / denom), total(self.length_sum) / denom)


# ------------------------------------------------------------------------------- rollout types
@struct.dataclass
class RolloutState:
    """Where a batch of environments stands between steps; pass it back as `state=`.

    Leaves have leading shape [num_envs]. `episode_return` and `episode_length` accumulate the
    episode in progress, so statistics of episodes that straddle two rollouts come out whole.
    `episode_params` holds the params fields a `params_sampler` drew for each environment's
    current episode (None without a sampler). `next_key` is the raw PRNG key (every row the
    same) a rollout continuing from this state draws from when given no `key`, so a
    continuation never replays the randomness of the rollout that made the state (None in a
    state made by hand: then continuing needs a key). `policy_carry` is a stateful policy's
    carry (leaves [num_envs, ...]) for the next step, already reset where an episode ended
    (None for a stateless policy; see `jaxsim.rollout`).
    """

    env_state: Any
    obs: jax.Array
    episode_return: jax.Array  # float32[num_envs]
    episode_length: jax.Array  # int32[num_envs]
    episode_params: dict[str, jax.Array] | None = None
    next_key: jax.Array | None = None  # uint32[num_envs, 2]
    policy_carry: Any = None

    @property
    def num_envs(self) -> int:
        return self.obs.shape[0]


def _restore_rollout_state(target: RolloutState, state: dict) -> RolloutState:
    """flax restores a RolloutState as any dataclass, except that a state dict saved before
    states carried `next_key` (agents' checkpoints) restores with an all-zero one, and one saved
    before states carried `policy_carry` restores with none."""
    if "next_key" not in state and target.next_key is not None:
        state = dict(state, next_key=np.zeros(np.shape(target.next_key), np.uint32))
    if "policy_carry" not in state and target.policy_carry is None:
        state = dict(state, policy_carry=None)
    unknown = sorted(set(state) - {f.name for f in dataclasses.fields(target)})
    if unknown:
        raise ValueError(f"Unknown field(s) {unknown} in state dict restoring a RolloutState")
    return target.replace(
        **{
            f.name: serialization.from_state_dict(getattr(target, f.name), state[f.name], f.name)
            for f in dataclasses.fields(target)
        }
    )


serialization.register_serialization_state(
    RolloutState,
    lambda x: {
        f.name: serialization.to_state_dict(getattr(x, f.name)) for f in dataclasses.fields(x)
    },
    _restore_rollout_state,
    override=True,
)


@struct.dataclass
class Trajectory:
    """A rollout's experience. Per-step leaves have leading shape [n, num_envs].

    `next_obs[t]` is the true next observation, taken before auto-reset: on a step that ends an
    episode it is the terminal observation and `obs[t + 1]` is the fresh reset one.
    `episode_return[t]` and `episode_length[t]` are the running totals of the episode including
    step t; where `done[t]` they are the finished episode's return and length.

    A per-step field that `rollout(..., outputs=...)` left out is None. `stats` holds the episode
    statistics when "episode_stats" was asked for (computed without keeping the per-step fields).
    `policy_carry` is a stateful policy's carry at the start of the rollout (leaves
    [num_envs, ...]; what a learner re-runs a recurrent policy from), None for a stateless one.
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
    checks: CheckState | None = None  # per environment, with rollout(..., checks=True)
    policy_carry: Any = None  # a stateful policy's carry before step 0

    @property
    def done(self) -> jax.Array:
        if self.terminated is None or self.truncated is None:
            raise ValueError(
                "Trajectory.done: this trajectory kept no terminated/truncated; pass "
                "outputs='rewards', 'all' or names including them to rollout(..., outputs=...)"
            )
        return self.terminated | self.truncated

    def episode_stats(self) -> EpisodeStats:
        """Statistics of the episodes that ended, by the same streaming rule as the backends."""
        if self.stats is not None:
            return self.stats
        if any(x is None for x in (self.episode_return, self.terminated, self.truncated)):
            raise ValueError(
                "episode_stats: this trajectory kept neither 'episode_stats' nor the fields it "
                "is computed from (episode_return, episode_length, terminated, truncated); pass "
                "them, or 'episode_stats', in rollout(..., outputs=...)"
            )

        def add(sums, xs):
            return sums.add(*xs), None

        xs = (self.done, self.episode_return, self.episode_length)
        sums, _ = jax.lax.scan(add, EpisodeSums.zeros(self.done.shape[1]), xs)
        return sums.stats()

    def finished_episodes(self) -> tuple[np.ndarray, np.ndarray]:
        """(returns, lengths) of every episode that ended, in step-major order, on the host.

        On a multi-host mesh every process gets all of them."""
        done = to_host(self.done)
        return to_host(self.episode_return)[done], to_host(self.episode_length)[done]
