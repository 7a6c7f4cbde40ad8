"""A rollout resolved once: a frozen, hashable spec (everything static) and a pytree of inputs.

`jaxsim.rollout` checks its arguments, then resolves them into a `RolloutSpec` and
`RolloutInputs`; every jit boundary below it (the scan backend, the fused driver, the kernel on
one device or per shard of a mesh) takes that pair, so nothing is resolved again per layer.
The key's split into reset, policy and dynamics keys is `jaxsim.rng.RolloutKeys`, made from
`inputs.key` inside each backend.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np
from flax import struct

from jaxsim.core import Env
from jaxsim.rollout.trajectory import STEP_OUTPUTS


@dataclasses.dataclass(frozen=True)
class RolloutSpec:
    """What a rollout compiles for: its identity in every jit cache (so hashable, static)."""

    env: Env
    n: int
    num_envs: int  # the whole batch (a shard of a meshed fused rollout holds a part)
    outputs: tuple[str, ...]  # `check_outputs`' names, in `STEP_OUTPUTS` order
    checks: bool
    params_axes: Any  # which params leaves are per environment (0) or shared (None)
    policy: Any  # the policy's static part: `partition`'s for the scan, a BlockPolicy fused
    sampler: Any  # the params sampler's static part (`partition`), or None
    mesh: Any = None  # a checked jax.sharding.Mesh, or None
    fused: Any = None  # the fused backend's FusedConfig; None on the scan
    use_kernel: bool = True  # fused: the Pallas kernel, or its plain-jnp reference

    @property
    def fields(self) -> tuple[str, ...]:
        """The per-step outputs kept, in `STEP_OUTPUTS` order."""
        return tuple(f for f in STEP_OUTPUTS if f in self.outputs)

    @property
    def with_sums(self) -> bool:
        return "episode_stats" in self.outputs

    def replace(self, **changes) -> RolloutSpec:
        return dataclasses.replace(self, **changes)


@struct.dataclass
class RolloutInputs:
    """A rollout's arrays: its raw key, params, starting state and the policy's and params
    sampler's array leaves (`partition`'s dynamic parts)."""

    key: jax.Array
    params: Any
    state: Any  # a RolloutState, or None: every environment starts from a reset
    policy: Any
    sampler: Any


# A policy may be a plain function (static: part of the compile-cache key) or a pytree callable
# holding arrays, e.g. network weights: its arrays are passed as inputs, so new weights of the
# same shapes reuse the compiled rollout. A params sampler is split alike.
def _is_array(x) -> bool:
    return isinstance(x, jax.Array | np.ndarray)


def partition(tree) -> tuple[list, tuple]:
    """`tree` -> (its array leaves (None elsewhere), the static rest): see `combine`."""
    leaves, treedef = jax.tree.flatten(tree)
    dynamic = [leaf if _is_array(leaf) else None for leaf in leaves]
    static = tuple(None if _is_array(leaf) else leaf for leaf in leaves)
    return dynamic, (treedef, static)


def combine(dynamic, static):
    """Inverse of `partition`."""
    treedef, static_leaves = static
    leaves = [d if s is None else s for d, s in zip(dynamic, static_leaves, strict=True)]
    return jax.tree.unflatten(treedef, leaves)


def combine_sampler(spec: RolloutSpec, inputs: RolloutInputs):
    """The params sampler, or None."""
    return None if spec.sampler is None else combine(inputs.sampler, spec.sampler)


def make(
    env: Env, n: int, num_envs: int, outputs, checks: bool, key, params, state, *,
    params_sampler=None, mesh=None, params_axes=None,
) -> tuple[RolloutSpec, RolloutInputs]:  # fmt: skip
    """(spec, inputs) of arguments `jaxsim.rollout` has checked; the policy's parts are filled
    by the backend that runs it (`partition` on the scan, a BlockPolicy fused)."""
    if params_axes is None:
        params_axes = env.params_axes(params, num_envs)
    sampler_dynamic, sampler_static = None, None
    if params_sampler is not None:
        sampler_dynamic, sampler_static = partition(params_sampler)
    spec = RolloutSpec(
        env, n, num_envs, outputs, checks, params_axes, None, sampler_static, mesh=mesh
    )
    return spec, RolloutInputs(key, params, state, None, sampler_dynamic)
