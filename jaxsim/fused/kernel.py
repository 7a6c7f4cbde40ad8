"""The fused rollout kernel: K environment steps and the policy per launch, a block per program.

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

from jaxsim import rng
from jaxsim.autoreset import ResetDraws, map_with_axes
from jaxsim.fused import block as blk
from jaxsim.plan import RolloutInputs, RolloutSpec, combine_sampler
from jaxsim.trajectory import STEP_OUTPUTS, Trajectory
from jaxsim.transition import Carry, Lanes, initial_carry


# ------------------------------------------------------------------------------------------ kernel
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


def _kernel(buf_refs, in_refs, out_refs, carry_refs, *, plan: _Launch):
    del buf_refs  # aliased to out_refs: rows that earlier launches wrote stay as they are
    spec = plan.spec
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
        r[...].astype(d) for r, d in zip(in_refs["consts"], plan.step.const_dtypes, strict=True)
    ]

    def body(i, carry):
        t = t0 + i
        seed = (seeds[t, 0], seeds[t, 1])
        values = policy.step_inputs(loaded, t)
        carry, record = plan.step(consts, params, carry, t, seed, draws, values)
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


def _launch(plan: _Launch, t0, steps, ins, carry, outs):
    """One pallas_call: `steps` steps from step `t0` for every block; returns (outs, carry).

    `outs` are the [n, num_envs, ...] outputs earlier launches wrote (None for the first launch):
    they are aliased to this launch's outputs, which it updates in rows t0 ... t0 + steps - 1.
    `t0` and `steps` are kernel inputs, not constants, so all launches after the first share
    one kernel.
    """
    spec = plan.spec
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
    out_specs = [per_step(trailing) for trailing, _ in plan.layout]
    bufs = [] if outs is None else outs
    out_shape = (
        [jax.ShapeDtypeStruct((spec.n, num_envs, *tr), dtype) for tr, dtype in plan.layout],
        jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), carry),
    )
    return pl.pallas_call(
        functools.partial(_kernel, plan=plan),
        out_shape=out_shape,
        grid=(num_envs // b,),
        in_specs=(out_specs if bufs else [], in_specs),
        out_specs=(out_specs, jax.tree.map(per_env, carry)),
        input_output_aliases={i: i for i in range(len(bufs))},
        interpret=spec.fused.resolved_interpret(),
        compiler_params=pltriton.CompilerParams(num_warps=spec.fused.num_warps),
        name=f"jaxsim_fused_{type(spec.env).__name__}",
    )(bufs, ins)


def _run_kernel(plan: _Launch, ins, carry):
    """ceil(n / K) launches: the first creates the outputs, the others write into them.

    Launch l runs steps l*K ... min((l + 1) * K, n) - 1: the last is shorter if K does not
    divide n.
    """
    n, k = plan.spec.n, plan.spec.fused.steps_per_launch
    outs, carry = _launch(plan, 0, min(k, n), ins, carry, None)

    def launch(i, outs_carry):
        outs, carry = outs_carry
        t0 = (i + 1) * k
        return _launch(plan, t0, jnp.minimum(k, n - t0), ins, carry, outs)

    more = math.ceil(n / k) - 1
    if more:
        outs, carry = lax.fori_loop(0, more, launch, (outs, carry))
    return outs, carry


def _run_reference(plan: _Launch, ins, carry):
    """The plain-jnp reference: the same block step on the whole (padded) batch, under lax.scan."""
    spec = plan.spec
    env, policy = spec.env, spec.policy
    num_envs = jax.tree.leaves(carry)[0].shape[0]
    seed = (ins["reset_seed"][0], ins["reset_seed"][1])
    index = ins["index_offset"][0] + jnp.arange(num_envs, dtype=jnp.uint32)
    draws = ResetDraws.make(env, seed, index, ins["sampler"])
    loaded = policy.load(ins["policy"])

    def body(carry, t):
        s = ins["policy_seeds"][t]
        values = policy.step_inputs(loaded, t)
        carry, record = blk.step(
            env, policy, values, ins["params"], spec.params_axes, carry, t, (s[0], s[1]), draws,
            spec.fields,
        )  # fmt: skip
        groups = blk.output_columns(record)
        outs = [
            cols[0] if not trailing else jnp.stack(cols, axis=-1)
            for cols, (trailing, _) in zip(groups, plan.layout, strict=True)
        ]
        return carry, outs

    carry, outs = lax.scan(body, carry, jnp.arange(spec.n, dtype=jnp.int32))
    return outs, carry


# ------------------------------------------------------------------------------------------ driver
def rollout_blocks(spec: RolloutSpec, inputs: RolloutInputs, axis_name=None) -> Trajectory:
    """The rollout; with `axis_name`, one shard of it inside `shard_map` (`jaxsim.fused.sharded`):
    `spec.num_envs` environments from global index axis_index * spec.num_envs, statistics over
    all shards."""
    env, n, num_envs, config = spec.env, spec.n, spec.num_envs, spec.fused
    key, params, state, checks = inputs.key, inputs.params, inputs.state, spec.checks
    offset = 0 if axis_name is None else lax.axis_index(axis_name) * num_envs
    policy = spec.policy
    sampler = combine_sampler(spec, inputs)
    padded = config.block_envs * math.ceil(num_envs / config.block_envs)
    fields = spec.fields
    policy_inputs = policy.prepare(inputs.policy, n, padded)
    params_axes = spec.params_axes

    with_sums = spec.with_sums
    if state is None:
        draws = ResetDraws.for_rollout(env, key, num_envs, sampler, offset)
        lanes = Lanes(vmapped=True)
        carry = initial_carry(env, lanes, params, params_axes, draws, with_sums, checks)
    else:
        carry = Carry.from_state(state, with_sums, checks)
    # Padded lanes repeat the last environment, so they step through valid physics.
    carry = jax.tree.map(lambda x: blk.pad_axis(x, padded), carry)
    padded_params = map_with_axes(
        lambda x, axis: x if axis is None else blk.pad_axis(jnp.asarray(x), padded),
        params,
        params_axes,
    )
    keys = rng.RolloutKeys.split(key)
    ins = dict(
        reset_seed=keys.reset_seed(),
        policy_seeds=keys.policy_seeds(n),
        policy=policy_inputs,
        sampler=sampler,
        index_offset=jnp.asarray(offset, jnp.uint32)[None],
    )

    def block_step(params, carry, t, seed, draws, values):
        return blk.step(env, policy, values, params, params_axes, carry, t, seed, draws, fields)

    def block_args(width):
        """Abstract arguments of `block_step` on `width` environments."""
        sds = jax.ShapeDtypeStruct
        u32 = sds((), jnp.uint32)

        def lanes(x):
            return sds((width, *x.shape[1:]), x.dtype)

        values = policy.abstract_step_inputs(policy_inputs, width)
        abstract_params = map_with_axes(
            lambda x, axis: sds(jnp.shape(x), jnp.asarray(x).dtype) if axis is None else lanes(x),
            padded_params,
            params_axes,
        )
        draws = ResetDraws(
            seed=(u32, u32),
            index=sds((width,), jnp.uint32),
            reset_keys=(sds((width,), jnp.uint32),) * env.num_reset_uniforms,
            sampler=jax.tree.map(lambda x: sds(x.shape, x.dtype), sampler),
            shapes=env.reset_uniform_shapes(),
            step_keys=(sds((width,), jnp.uint32),) * env.num_step_uniforms,
            step_shapes=env.step_uniform_shapes(),
        )
        t = sds((), jnp.int32)
        return abstract_params, jax.tree.map(lanes, carry), t, (u32, u32), draws, values

    # The record's leaves: shapes and dtypes of one step on the whole batch.
    template = jax.eval_shape(block_step, *block_args(padded))[1]
    layout = tuple(blk.output_layout(template))
    if spec.use_kernel:
        step, ins["consts"] = _Hoisted.trace(block_step, *block_args(config.block_envs))
        # Kernels take no captured arrays and no 0-d inputs: shared values travel as [1, ...].
        ins["params"] = map_with_axes(_as_input, padded_params, params_axes)
        ins["sampler"] = jax.tree.map(lambda x: _as_input(x, None), sampler)
        launch = _Launch(spec, layout, step)
        outs, carry = _run_kernel(launch, ins, carry)
    else:
        ins["params"] = padded_params
        outs, carry = _run_reference(_Launch(spec, layout, None), ins, carry)

    if padded != num_envs:
        outs = [x[:, :num_envs] for x in outs]
        carry = jax.tree.map(lambda x: x[:num_envs], carry)
    record = blk.record_from_outputs(template, outs)
    if env.obs_shape is not None:  # the kernel wrote the components (MinAtar: packed words)
        for name in ("obs", "next_obs"):
            if record.get(name) is not None:
                record[name] = env.obs_from_components(record[name])
    final_state = carry.to_state(env, Lanes(vmapped=True), params, params_axes)
    stats = None if carry.sums is None else carry.sums.stats(axis_name)
    per_step = {name: record.get(name) for name in STEP_OUTPUTS}
    return Trajectory(**per_step, final_state=final_state, stats=stats, checks=carry.checks)


rollout_jit = jax.jit(rollout_blocks, static_argnums=0)
