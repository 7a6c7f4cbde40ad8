"""The fused kernel's plain-jnp reference: the same block step on the whole batch, under lax.scan.

`jaxsim.fused.kernel.run` is tested against this (`run_fused(..., reference=True)`): it takes
the same inputs and gives the same outputs, with no Pallas, no blocks and no launches. (The scan
backend is the other reference: the tests hold the kernel to both.)
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from jaxsim.fused import block as blk
from jaxsim.rng import ResetDraws
from jaxsim.rollout.spec import RolloutSpec


def run(spec: RolloutSpec, layout: tuple, block_step, ins: dict, carry):
    """`jaxsim.fused.kernel.run` on the whole (padded) batch as one block; returns (outputs,
    carry), the outputs [n, num_envs] or [n, num_envs, k] as the kernel's `layout` says."""
    policy = spec.policy
    num_envs = carry.episode_return.shape[0]
    seed = (ins["reset_seed"][0], ins["reset_seed"][1])
    index = ins["index_offset"][0] + jnp.arange(num_envs, dtype=jnp.uint32)
    draws = ResetDraws.make(spec.env, seed, index, ins["sampler"])
    loaded = policy.load(ins["policy"])

    def body(carry, t):
        s = ins["policy_seeds"][t]
        values = policy.step_inputs(loaded, t)
        carry, record = block_step(ins["params"], carry, t, (s[0], s[1]), draws, values)
        groups = blk.output_columns(record)
        outs = [
            cols[0] if not trailing else jnp.stack(cols, axis=-1)
            for cols, (trailing, _) in zip(groups, layout, strict=True)
        ]
        return carry, outs

    carry, outs = lax.scan(body, carry, jnp.arange(spec.n, dtype=jnp.int32))
    return outs, carry
