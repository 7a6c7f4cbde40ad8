"""Rollouts over a device mesh (`rollout(..., mesh=)`): the environment batch split on `ENV_AXIS`.

A mesh splits the batch over the devices of its `ENV_AXIS` axis; its other axes (if any) hold
copies. Every environment keeps its global index, so counter-based resets and built-in policies
draw what they would on one device. The scan backend lets XLA's GSPMD partitioner split the
jitted scan (sharding constraints on the batch), the fused backend runs its kernel per shard
under `jax.shard_map`. This module imports nothing else of jaxsim (the others import it).
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

ENV_AXIS = "envs"  # the mesh axis the environment batch is split over


def check_mesh(mesh, num_envs: int, owner: str = "rollout") -> Mesh:
    """`mesh` validated for `num_envs` environments, its axes made Auto (GSPMD-partitioned).

    Raises TypeError for anything but a `jax.sharding.Mesh`; ValueError for a mesh without an
    `ENV_AXIS` axis, devices of more than one platform, or a batch that the axis size (or the
    number of processes the mesh spans) does not divide. On jax >= 0.10 `jax.make_mesh` makes
    Explicit axes, which sharding constraints cannot name; the same devices and axis names with
    Auto axes shard the same way.
    """
    if not isinstance(mesh, Mesh):
        raise TypeError(
            f"{owner}: mesh must be a jax.sharding.Mesh with an axis named {ENV_AXIS!r} "
            f"(e.g. jax.make_mesh((jax.device_count(),), ({ENV_AXIS!r},))), got "
            f"{type(mesh).__name__}"
        )
    if ENV_AXIS not in mesh.axis_names:
        raise ValueError(
            f"{owner}: mesh has axes {tuple(mesh.axis_names)} but the environment batch is split "
            f"over an axis named {ENV_AXIS!r} (jaxsim.ENV_AXIS); name one axis {ENV_AXIS!r}"
        )
    devices = list(mesh.devices.flat)
    platforms = sorted({d.platform for d in devices})
    if len(platforms) > 1:
        raise ValueError(f"{owner}: mesh mixes devices of platforms {platforms}; use one platform")
    size = mesh.shape[ENV_AXIS]
    if num_envs % size:
        raise ValueError(
            f"{owner}: num_envs={num_envs} is not divisible by the size {size} of the mesh axis "
            f"{ENV_AXIS!r}; use a multiple of {size}"
        )
    processes = len({d.process_index for d in devices})
    if num_envs % processes:
        raise ValueError(
            f"{owner}: num_envs={num_envs} is not divisible by the {processes} processes the "
            "mesh spans; use a multiple of the process count"
        )
    if all(t == AxisType.Auto for t in mesh.axis_types):
        return mesh
    return Mesh(mesh.devices, mesh.axis_names, axis_types=(AxisType.Auto,) * len(mesh.axis_names))


def check_placement(mesh: Mesh | None, owner: str, **trees) -> None:
    """Raises ValueError if an array of `trees` is committed to another platform than `mesh`.

    Uncommitted arrays (made without `jax.device_put`) move where the computation runs, and
    tracers (inside jit) carry no devices: both pass, and so does everything when `mesh` is None.
    """
    if mesh is None:
        return
    platform = mesh.devices.flat[0].platform
    for name, tree in trees.items():
        for leaf in jax.tree.leaves(tree):
            if not isinstance(leaf, jax.Array) or isinstance(leaf, jax.core.Tracer):
                continue
            if not leaf.committed:
                continue
            theirs = sorted({d.platform for d in leaf.devices()})
            if theirs != [platform]:
                raise ValueError(
                    f"{owner}: {name} holds arrays on {theirs} devices but the mesh's devices "
                    f"are {platform}; move them with jax.device_put or build the mesh from "
                    f"jax.devices({theirs[0]!r})"
                )


def batch_spec(batch_axis: int = 0) -> P:
    """The partition of an array whose axis `batch_axis` is the environment batch."""
    return P(*(None,) * batch_axis, ENV_AXIS)


def constrain(tree, mesh: Mesh | None, batch_axis: int = 0):
    """Every array leaf of `tree` split over `ENV_AXIS` along `batch_axis` (None: unchanged).

    Inside jit a sharding constraint for GSPMD; outside, a transfer. Leaves of fewer dimensions
    (scalars) are left to the partitioner.
    """
    if mesh is None:
        return tree
    sharding = NamedSharding(mesh, batch_spec(batch_axis))

    def one(x):
        return jax.lax.with_sharding_constraint(x, sharding) if x.ndim > batch_axis else x

    return jax.tree.map(one, tree)


def to_host(x) -> np.ndarray:
    """A whole array as numpy here, gathered from the other processes where it spans them."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)
