"""The smallest family's step (CartPole, counter-based actions) lowered for Mosaic GPU from a CPU:
what of the fused kernel Mosaic GPU takes today (jaxsim/fused/MOSAIC.md says what it does not).

The kernel here is the Mosaic form MOSAIC.md describes, cut down to the state: `plgpu.kernel`
over a grid of blocks named by `lax.axis_index`, each block's state rows (256 lanes, 1 KiB)
copied from global memory into shared memory and back, K steps of `env_transition` between,
actions drawn from the per-step seeds (read from shared memory) and the lanes' global indices.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl

import jaxsim
from benchmarks.gpu.lowering import lower_for_cuda
from jaxsim import rng
from jaxsim.core import env_transition

plgpu = pytest.importorskip(
    "jax.experimental.pallas.mosaic_gpu", reason="this jax has no Pallas Mosaic GPU"
)
if not hasattr(plgpu, "kernel") or not hasattr(plgpu.Layout, "WG_STRIDED"):
    pytest.skip("this jax's Mosaic GPU has no plgpu.kernel or WG_STRIDED", allow_module_level=True)

BLOCK, BLOCKS, K = 256, 4, 64
MOSAIC_CALL = "mosaic_gpu"  # the custom call's target: mosaic_gpu (jax <= 0.9), mosaic_gpu_v2


def hash_action(seed, index, env):
    """Action bits as the kernel would draw them, without RandomPolicy's floor (see below)."""
    del env
    return (rng.bits(seed, index, 0, rng.POLICY_STREAM) >> 31).astype(jnp.int32)


def random_action(seed, index, env):
    return jaxsim.random_policy(env).from_seed(seed, index)


def lower_cartpole_block_kernel(act):
    """CartPole's K-step state update per block under `plgpu.kernel`, lowered for CUDA."""
    env = jaxsim.make("CartPole-v1")
    # Shared params as Python scalars: a Mosaic GPU kernel captures no arrays.
    params = jax.tree.map(lambda x: np.asarray(x).item(), env.default_params)
    leaves, treedef = jax.tree.flatten(env.state_template())
    n = len(leaves)

    def body(seeds_gmem, *refs):
        state_in, state_out = refs[:n], refs[n : 2 * n]
        rows, barrier, seeds = refs[2 * n : 3 * n], refs[3 * n], refs[3 * n + 1]
        block = lax.axis_index("block")
        lanes = pl.ds(block * BLOCK, BLOCK)
        plgpu.copy_gmem_to_smem(seeds_gmem, seeds, barrier)
        for src, row in zip(state_in, rows, strict=True):
            plgpu.copy_gmem_to_smem(src.at[lanes], row, barrier)
        plgpu.barrier_wait(barrier)
        lane = jnp.arange(BLOCK, dtype=jnp.int32)  # 1-D: its layout must be named
        lane = plgpu.layout_cast(lane, plgpu.Layout.WG_STRIDED((BLOCK,), vec_size=2))
        index = (block * BLOCK + lane).astype(jnp.uint32)

        def step(t, state):
            action = act((seeds[0, t], seeds[1, t]), index, env)
            return env_transition(env, state, action, params)[0]

        state = jax.tree.unflatten(treedef, [row[...] for row in rows])
        state = lax.fori_loop(0, K, step, state)
        for row, value in zip(rows, jax.tree.leaves(state), strict=True):
            row[...] = value.astype(row.dtype)
        plgpu.commit_smem()
        for row, dst in zip(rows, state_out, strict=True):
            plgpu.copy_smem_to_gmem(row, dst.at[lanes])
        plgpu.wait_smem_to_gmem(0)

    def run(seeds, *state):
        kernel = plgpu.kernel(
            body,
            out_type=[jax.ShapeDtypeStruct(x.shape, x.dtype) for x in state],
            scratch_types=[
                *[plgpu.SMEM((BLOCK,), x.dtype) for x in state],
                plgpu.Barrier(num_arrivals=n + 1),
                plgpu.SMEM((2, K), jnp.uint32),  # [2, K], not [K, 2]: rows of >= 16 bytes
            ],
            grid=(BLOCKS,),
            grid_names=("block",),
            compiler_params=plgpu.CompilerParams(),
        )
        return kernel(seeds, *state)

    sds = jax.ShapeDtypeStruct
    state = [sds((BLOCK * BLOCKS,), x.dtype) for x in leaves]
    return lower_for_cuda(run, sds((2, K), jnp.uint32), *state)


def test_cartpole_steps_on_a_block_lower_for_mosaic_gpu():
    """Physics (sin, cos, selects, the int32 time limit), the counter-based hash (uint32
    multiply, xor, shifts), scalar reads of the step's seed from shared memory, and 1 KiB
    copies between global and shared memory all lower."""
    assert MOSAIC_CALL in lower_cartpole_block_kernel(hash_action).as_text()


def test_the_random_policys_discrete_draw_lowers_for_mosaic_gpu():
    """`rng.to_randint` converts `u * n` (never negative) to int32 without `floor`, which
    Mosaic GPU's lane lowering lacks (jax 0.10): the random policy's actions lower."""
    assert MOSAIC_CALL in lower_cartpole_block_kernel(random_action).as_text()
