"""Running observation normaliser and reward scaler: `(init, update)` pairs of pure functions."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class RunningStats:
    """Mean and variance of everything seen so far (Chan et al.'s parallel update)."""

    mean: jax.Array  # [*shape]
    var: jax.Array  # [*shape]
    count: jax.Array  # float32 scalar


def running_stats_init(shape: tuple[int, ...]) -> RunningStats:
    # A tiny prior count (as Stable-Baselines3's VecNormalize) keeps the first update well defined.
    return RunningStats(
        mean=jnp.zeros(shape, jnp.float32),
        var=jnp.ones(shape, jnp.float32),
        count=jnp.float32(1e-4),
    )


def running_stats_update(stats: RunningStats, x: jax.Array) -> RunningStats:
    """Folds a batch in. x: [..., *shape]; every leading axis is a sample axis."""
    shape = stats.mean.shape
    x = x.reshape((-1, *shape)).astype(jnp.float32)
    n = jnp.float32(x.shape[0])
    batch_mean = x.mean(0)
    batch_var = x.var(0)
    delta = batch_mean - stats.mean
    total = stats.count + n
    mean = stats.mean + delta * n / total
    m2 = stats.var * stats.count + batch_var * n + delta**2 * stats.count * n / total
    return RunningStats(mean=mean, var=m2 / total, count=total)


def standard_deviation(stats: RunningStats, eps: float = 1e-8) -> jax.Array:
    return jnp.sqrt(stats.var + eps)


def normalize(stats: RunningStats, x: jax.Array) -> jax.Array:
    """(x - mean) / std, broadcasting over x's leading axes."""
    return (x.astype(stats.mean.dtype) - stats.mean) / standard_deviation(stats)


class ObservationNormalizer(NamedTuple):
    """init() -> RunningStats; update(stats, obs[..., *obs_shape]) -> RunningStats."""

    init: Callable[[], RunningStats]
    update: Callable[[RunningStats, jax.Array], RunningStats]


def observation_normalizer(obs_shape: tuple[int, ...]) -> ObservationNormalizer:
    """Running mean/std of observations; apply it with `normalize(stats, obs)`."""
    return ObservationNormalizer(
        init=lambda: running_stats_init(obs_shape),
        update=running_stats_update,
    )


@struct.dataclass
class RewardScaleState:
    """Per-environment discounted return in progress and the running statistics of it."""

    returns: jax.Array  # [num_envs]
    stats: RunningStats  # of the discounted return, scalar shape


class RewardScaler(NamedTuple):
    """init() -> state; update(state, reward[T, B], done[T, B]) -> (state, scaled reward[T, B])."""

    init: Callable[[], RewardScaleState]
    update: Callable[[RewardScaleState, jax.Array, jax.Array], tuple[RewardScaleState, jax.Array]]


def reward_scaler(num_envs: int, gamma: float) -> RewardScaler:
    """Divides rewards by the running std of the discounted return (not centred), as
    Stable-Baselines3's VecNormalize and cleanrl's NormalizeReward do."""

    def init() -> RewardScaleState:
        return RewardScaleState(jnp.zeros((num_envs,), jnp.float32), running_stats_init(()))

    def update(state: RewardScaleState, reward: jax.Array, done: jax.Array):
        def step(ret, rd):
            r, d = rd
            ret = ret * gamma + r
            return jnp.where(d, 0.0, ret), ret

        returns, seen = jax.lax.scan(step, state.returns, (reward, done))
        stats = running_stats_update(state.stats, seen)
        return RewardScaleState(returns, stats), reward / standard_deviation(stats)

    return RewardScaler(init, update)
