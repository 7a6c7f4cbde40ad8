"""The fused rollout kernel: K environment steps and the policy per launch, a block per program.

Three parts, in the shape of a Pallas op: the kernel body (`_kernel`: the block loop calling the
block step), its `pallas_call` with the BlockSpecs (`_launch`), and the wrapper `run`, which hoists
the step's constants and makes the launches. The plain-jnp reference it is tested against is
`jaxsim.fused.reference.run`; `jaxsim.fused.driver` prepares both's inputs.

Each program of the grid owns a block of `block_envs` environments. It loads their state once,
runs `steps_per_launch` steps (policy, dynamics, auto-reset) with the state held in registers,
writes one row of `block_envs` lanes per step for each requested output, and stores the state
back. Outputs are full-length [n, num_envs] arrays: every launch writes its own rows in place
(input/output aliasing), so no launch copies or concatenates another's results.

GPU lowering: Triton, chosen over Mosaic GPU. The kernel is SIMT elementwise code over a 1-D
block (hashes, transcendental functions, selects) plus small matmuls for an MLP policy, and it
stores a row of every output at every step straight to device memory. Triton lowers exactly
that: refs are global-memory pointers, stores of B contiguous lanes coalesce, and no block is
staged through shared memory. Mosaic GPU (the default lowering of jax >= 0.10, which deprecates
Triton from 0.11) is built around TMA copies of whole blocks into shared memory and warpgroup
matmuls; it needs blocks of a multiple of 128 bytes and, for this kernel, an [n, block] output
block would have to sit in shared memory (too big for long rollouts) or be pipelined by hand,
and `pl.pallas_call` on Mosaic GPU is itself deprecated in favour of `plgpu.kernel`. Lowering
this kernel for Mosaic GPU (jax 0.10.2, cross-lowered from a CPU) fails at once: it copies every
block through shared memory and refuses copies of fewer than 128 bytes, such as the scalar
inputs. So the kernel asks for Triton explicitly (`compiler_params`), which jax 0.11 still ships.

Triton constraints this respects: every array a step loads or stores has a power-of-two size
(a [block] row; block_envs is a power of two; observations travel as one [block] array per
component, never as [block, obs_dim]); an MLPPolicy's weights are zero-padded to power-of-two
sizes, its extra logits masked with -inf, and the [block, obs_dim] it reads gets zero columns
(`block.pad_mlp`); booleans are stored as int8; ragged batches are padded to whole blocks,
since the Triton lowering does not mask out-of-bounds blocks.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.extend as jex
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

from jaxsim.fused import block as blk
from jaxsim.rng import ResetDraws
from jaxsim.rollout.spec import RolloutSpec
from jaxsim.rollout.step import map_with_axes


@dataclasses.dataclass(frozen=True)
class _Hoisted:
    """A function traced once to a jaxpr, whose captured constants become explicit arguments.

    Environment and policy code may close over numpy arrays (a Box space's bounds, say), but a
    Pallas kernel may capture none: the block step is traced here and its constants travel into
    the kernel as inputs (booleans as int8, like every other boolean the kernel moves).
    """

    jaxpr: Any
    out_tree: Any
    const_dtypes: tuple

    @classmethod
    def trace(cls, fn, *example_args) -> tuple[_Hoisted, list[jax.Array]]:
        closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*example_args)
        consts = [jnp.asarray(c) for c in closed.consts]
        dtypes = tuple(c.dtype for c in consts)
        hoisted = cls(closed.jaxpr, jax.tree.structure(out_shape), dtypes)
        return hoisted, [c.astype(blk.storage_dtype(c.dtype)) for c in consts]

    def __call__(self, consts, *args):
        fn = jex.core.jaxpr_as_fun(jex.core.ClosedJaxpr(self.jaxpr, consts))
        return jax.tree.unflatten(self.out_tree, fn(*jax.tree.leaves(args)))


@dataclasses.dataclass(frozen=True)
class _Launch:
    """What the kernel and its launches share beyond the rollout's spec (static)."""

    spec: RolloutSpec  # its policy a BlockPolicy (the arrays travel as kernel inputs)
    layout: tuple  # (trailing shape, storage dtype) of each output: see blk.output_layout
    step: _Hoisted  # blk.step on one block, its constants hoisted (kernel input "consts")


def _kernel(buf_refs, in_refs, out_refs, carry_refs, *, launch: _Launch):
    del buf_refs  # aliased to out_refs: rows that earlier launches wrote stay as they are
    spec = launch.spec
    env, policy, block_envs = spec.env, spec.policy, spec.fused.block_envs
    t0, steps = in_refs["window"][0], in_refs["window"][1]
    params = map_with_axes(_load, in_refs["params"], spec.params_axes)
    sampler = jax.tree.map(lambda r: _load(r, None), in_refs["sampler"])
    reset_seed = (in_refs["reset_seed"][0], in_refs["reset_seed"][1])
    lane = jnp.arange(block_envs, dtype=jnp.int32)
    # Global indices: a shard of a meshed rollout starts at its offset.
    offset = in_refs["index_offset"][0]
    index = offset + (pl.program_id(0) * block_envs + lane).astype(jnp.uint32)
    draws = ResetDraws.make(env, reset_seed, index, sampler)
    loaded = policy.load(in_refs["policy"])
    seeds = in_refs["policy_seeds"]
    consts = [
        r[...].astype(d) for r, d in zip(in_refs["consts"], launch.step.const_dtypes, strict=True)
    ]

    def body(i, carry):
        t = t0 + i
        seed = (seeds[t, 0], seeds[t, 1])
        values = policy.step_inputs(loaded, t)
        carry, record = launch.step(consts, params, carry, t, seed, draws, values)
        # One row of B lanes per output and component: out[t, block] or out[t, block, c].
        for ref, cols in zip(out_refs, blk.output_columns(record), strict=True):
            if len(ref.shape) == 2:
                ref[t] = cols[0].astype(ref.dtype)
            else:
                for c, col in enumerate(cols):
                    ref[t, :, c] = col.astype(ref.dtype)
        return carry

    carry = jax.tree.map(lambda r: r[...], in_refs["carry"])
    carry = lax.fori_loop(0, steps, body, carry)
    for ref, value in zip(jax.tree.leaves(carry_refs), jax.tree.leaves(carry), strict=True):
        ref[...] = value.astype(ref.dtype)


def _as_input(x, axis):
    """A shared value travels with a leading axis of one (kernels take no 0-d inputs)."""
    x = jnp.asarray(x)
    return x[None] if axis is None else x


def _load(ref, axis):
    """Inverse of `_as_input` on a kernel ref: a shared value is row 0, whatever its shape."""
    return ref[0] if axis is None else ref[...]


def _launch(launch: _Launch, t0, steps, ins, carry, outs):
    """One pallas_call: `steps` steps from step `t0` for every block; returns (outs, carry).

    `outs` are the [n, num_envs, ...] outputs earlier launches wrote (None for the first launch):
    they are aliased to this launch's outputs, which it updates in rows t0 ... t0 + steps - 1.
    `t0` and `steps` are kernel inputs, not constants, so all launches after the first share
    one kernel.
    """
    spec = launch.spec
    b = spec.fused.block_envs
    num_envs = jax.tree.leaves(carry)[0].shape[0]

    def whole(x):
        return pl.BlockSpec(x.shape, lambda j: (0,) * x.ndim)

    def per_step(trailing=()):  # [n, num_envs, *trailing]: all steps, this block's environments
        return pl.BlockSpec((spec.n, b, *trailing), lambda j: (0, j) + (0,) * len(trailing))

    def per_env(x):  # [num_envs, *trailing]: this block's environments
        return pl.BlockSpec((b, *x.shape[1:]), lambda j: (j,) + (0,) * (x.ndim - 1))

    window = jnp.stack([jnp.asarray(t0, jnp.int32), jnp.asarray(steps, jnp.int32)])
    ins = dict(ins, window=window, carry=carry)
    in_specs = jax.tree.map(whole, ins)
    in_specs["carry"] = jax.tree.map(per_env, carry)
    in_specs["params"] = map_with_axes(
        lambda x, axis: whole(x) if axis is None else per_env(x), ins["params"], spec.params_axes
    )
    if spec.policy.time_major:
        in_specs["policy"] = [per_step(a.shape[2:]) for a in ins["policy"]]
    out_specs = [per_step(trailing) for trailing, _ in launch.layout]
    bufs = [] if outs is None else outs
    out_shape = (
        [jax.ShapeDtypeStruct((spec.n, num_envs, *tr), dtype) for tr, dtype in launch.layout],
        jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), carry),
    )
    return pl.pallas_call(
        functools.partial(_kernel, launch=launch),
        out_shape=out_shape,
        grid=(num_envs // b,),
        in_specs=(out_specs if bufs else [], in_specs),
        out_specs=(out_specs, jax.tree.map(per_env, carry)),
        input_output_aliases={i: i for i in range(len(bufs))},
        interpret=spec.fused.resolved_interpret(),
        compiler_params=pltriton.CompilerParams(num_warps=spec.fused.num_warps),
        name=f"jaxsim_fused_{type(spec.env).__name__}",
    )(bufs, ins)


def run(spec: RolloutSpec, layout: tuple, block_step, example_args, ins: dict, carry):
    """The kernel's wrapper: the rollout's steps on every block; returns (outputs, carry).

    Args:
      spec: the rollout's spec, its policy a `BlockPolicy` and its `fused` a `FusedConfig`.
      layout: (trailing shape, storage dtype) of each output (`block.output_layout`).
      block_step: `(params, carry, t, seed, draws, step_inputs) -> (carry, record)` on a block.
      example_args: `block_step`'s arguments (shapes and dtypes) on one block.
      ins: the kernel's inputs: reset_seed, policy_seeds, policy, sampler, index_offset and
        params, on the batch padded to whole blocks (`carry`'s size).

    ceil(n / K) launches: the first creates the [n, num_envs, ...] outputs, the others write
    into them (interpreted, all write into outputs made before them: one kernel to compile).
    Launch l runs steps l*K ... min((l + 1) * K, n) - 1: the last is shorter if K does not
    divide n.
    """
    step, consts = _Hoisted.trace(block_step, *example_args)
    # Kernels take no captured arrays and no 0-d inputs: shared values travel as [1, ...].
    ins = dict(
        ins,
        consts=consts,
        params=map_with_axes(_as_input, ins["params"], spec.params_axes),
        sampler=jax.tree.map(lambda x: _as_input(x, None), ins["sampler"]),
    )
    launch = _Launch(spec, layout, step)
    n, k = spec.n, spec.fused.steps_per_launch
    launches = math.ceil(n / k)

    def next_launch(i, outs_carry):
        outs, carry = outs_carry
        t0 = i * k
        return _launch(launch, t0, jnp.minimum(k, n - t0), ins, carry, outs)

    if launches > 1 and spec.fused.resolved_interpret():
        # Interpreted (the CPU's tests): every launch writes into buffers made here, so the
        # kernel is one program, compiled once; a first launch that creates its outputs is a
        # second program, and interpreting doubles what each costs to compile. On a GPU the
        # first launch creates them: no extra pass over the trajectory's memory.
        num_envs = jax.tree.leaves(carry)[0].shape[0]
        outs = [jnp.zeros((n, num_envs, *tr), dtype) for tr, dtype in layout]
        return lax.fori_loop(0, launches, next_launch, (outs, carry))
    outs, carry = _launch(launch, 0, min(k, n), ins, carry, None)
    if launches > 1:
        outs, carry = lax.fori_loop(1, launches, next_launch, (outs, carry))
    return outs, carry
