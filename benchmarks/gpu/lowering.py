"""Lowering a jitted function for a CUDA GPU on a machine that has none."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
from jax.sharding import AbstractDevice, AbstractMesh, AxisType

# The GPU the check runs on. jax >= 0.11 reads its compute capability (9.0) from the kind.
H200 = AbstractDevice(device_kind="NVIDIA H200", num_cores=1, platform="cuda")
TRITON_CALL = "__gpu$xla.gpu.triton"  # the custom call a Pallas kernel lowers to


def gpu_mesh(device: AbstractDevice = H200) -> AbstractMesh:
    """A one-device abstract mesh of `device`'s kind (jax's own deviceless Triton test's form)."""
    return AbstractMesh((1,), ("x",), (AxisType.Explicit,), abstract_device=device)


def lower_for_cuda(fn: Callable[..., Any], *args: Any, device: AbstractDevice = H200):
    """`jax.jit(fn)` traced and lowered (not compiled) for CUDA, with no GPU present.

    jax 0.10 lowers a Pallas kernel for Triton without a device by assuming compute capability
    9.0; jax 0.11 dropped that fallback ("No supported GPU devices found") and reads the GPU
    from the abstract mesh in context instead. Inside `gpu_mesh(device)` both versions lower.
    The mesh's axes are explicit, so nothing may run eagerly inside it: make `args` (keys,
    arrays) before calling, and build policies or parameters inside `fn`, where they are traced.

    Args:
      fn: the function to lower; its outputs may be any pytree.
      *args: its arguments, concrete arrays or `jax.ShapeDtypeStruct`s.
      device: the GPU to lower for.

    Returns:
      The `jax.stages.Lowered`; `.as_text()` is its StableHLO.
    """
    with jax.sharding.use_abstract_mesh(gpu_mesh(device)):
        return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",))
