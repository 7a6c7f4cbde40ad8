"""One rollout step on a block of environments: the code the fused kernel and its reference share.

Everything here is elementwise over a block of `B` environments held as struct-of-arrays (one
[B] array per scalar state field, [B, *shape] per array-valued one, e.g. [B, num_particles]), so
it runs unchanged on a block inside the Pallas kernel and on the whole batch in the plain-jnp
reference. Physics comes from the environment's own methods and
actions from the policy's own `from_seed` / `act_from_seed`; nothing is re-implemented here.
What is here is layout: columns, records, and an MLP's weights padded to power-of-two sizes.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import jax
import jax.numpy as jnp

from jaxsim.policies import MLPPolicy, OpenLoopPolicy, RandomPolicy, mlp_apply
from jaxsim.rollout.step import Lanes, policy_step


# ----------------------------------------------------------------------------- policies on a block
@dataclasses.dataclass(frozen=True)
class BlockPolicy:
    """How the kernel evaluates one kind of policy on a block (its adapter to
    `jaxsim.rollout.step.policy_step`): static, a jit cache key, one subclass per kind; the
    policy's arrays travel apart, as kernel inputs.

    `prepare` turns the arrays into kernel inputs, inside the jitted rollout; `load` runs once
    per launch on the input refs (on the arrays, in the reference); `step_inputs` and `act` run
    once per step, and `act` is a function of values only. `time_major`: the inputs are
    [n, num_envs, ...], whose blocks follow the environments.
    """

    time_major: ClassVar[bool] = False

    def prepare(self, inputs, n: int, num_envs: int) -> list:
        """The kernel's policy inputs for n steps of num_envs (padded) environments."""
        return inputs

    def load(self, refs):
        return [r[...] for r in refs]

    def step_inputs(self, loaded, t) -> list:
        """What `act` needs at step t (the loaded weights, by default)."""
        return loaded

    def abstract_step_inputs(self, inputs, width: int):
        """`step_inputs`' shapes on a block of `width` environments."""
        return inputs

    def view(self, env, columns):
        """The observation as the policy reads it and the step records it: [B] columns."""
        return columns

    def act(self, env, inputs, index, obs):
        """`inputs`: (this step's `step_inputs`, the policy's seed) -> (action[B, *shape],
        extras: a pytree of [B, ...])."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class RandomBlock(BlockPolicy):
    policy: RandomPolicy

    def act(self, env, inputs, index, obs):
        return self.policy.from_seed(inputs[1], index), {}


@dataclasses.dataclass(frozen=True)
class OpenLoopBlock(BlockPolicy):
    """Actions given as [n, num_envs] or [n, num_envs, k] (k components of `shape`)."""

    shape: tuple[int, ...]
    time_major: ClassVar[bool] = True

    def prepare(self, inputs, n: int, num_envs: int) -> list:
        return [pad_axis(a[:n], num_envs, axis=1) for a in inputs]

    def load(self, refs):
        return refs  # indexed per step: actions[t]

    def step_inputs(self, loaded, t) -> list:
        (actions,) = loaded  # [n, B] or [n, B, k]
        if not self.shape:
            return [actions[t]]
        return [actions[t, :, c] for c in range(math.prod(self.shape))]

    def abstract_step_inputs(self, inputs, width: int):
        return [jax.ShapeDtypeStruct((width,), inputs[0].dtype)] * math.prod(self.shape)

    def act(self, env, inputs, index, obs):
        return join_columns(inputs[0], self.shape), {}


@dataclasses.dataclass(frozen=True)
class TreeBlock(BlockPolicy):
    """A pytree policy with an elementwise `act_from_seed(seed, index, obs)`; its leaves are
    the kernel's inputs. It reads the observation (an image's packed words unpacked for it)."""

    treedef: Any

    def act(self, env, inputs, index, obs):
        values, seed = inputs
        policy = jax.tree.unflatten(self.treedef, values)
        columns = self.obs_columns(policy, env.obs_cells(obs))
        out = policy.act_from_seed(seed, index, stack_last(columns))
        return out if isinstance(out, tuple) else (out, {})

    def obs_columns(self, policy, columns):
        return columns


FIRST_LAYERS = ("dot", "columns", "chunks")  # how an MLP's first layers read the observation
MLP_CHUNK = 16  # components per dot of "chunks"


@dataclasses.dataclass(frozen=True)
class MLPBlock(TreeBlock):
    """An `MLPPolicy`, its weights padded to power-of-two sizes (`pad_mlp`). Only MLPPolicy's
    own act_from_seed is known to be right on padded weights (a subclass may override it).

    `first_layer` says how the actor's and critic's first layers read the observation:
      "dot": `act_from_seed` on the observation stacked into one [B, obs_dim] operand (the
        matmul the scan backend runs; interpret mode uses it, bit for bit with the scan);
      "columns": the sum of each component's contribution, `sum_i obs_i[:, None] * W[i]`
        over the observation's `obs_dim` [B] columns, rows W[i] loaded from the kernel's
        input per step: no [B, obs_dim] operand built from obs_dim - 1 pairwise stacks and no
        [obs_dim, H] dot operand in shared memory. The same products in another order:
        float32 rounding apart from "dot". Measured for sm_90 (issue 41) it compiles slower:
        the hidden layers' dots dominate a classic MLP, and a MinAtar observation's 400 to
        1000 unrolled terms per network outgrow Triton's layout passes (Breakout: past 120
        CPU-s in ttgir);
      "chunks": `MLP_CHUNK` components at a time, each chunk a [B, MLP_CHUNK] operand and a
        dot with its rows of W. Measured for sm_90 it does not help either: Triton gives each
        dot its own shared memory (Breakout at 32 environments and 8 warps: 496 KB, 20 KB
        spilled, 40 CPU-s).
    So "dot" is `FusedConfig`'s default; the others stay selectable (and measurable:
    `benchmarks.gpu.hopper_compile`'s "mlp/columns", "mlp/chunks").
    """

    obs_dim: int = 0  # the observation's components, before padding (the rows "columns" reads)
    first_layer: str = "dot"

    def __post_init__(self):
        if self.first_layer not in FIRST_LAYERS:
            raise ValueError(
                f"MLPBlock: first_layer must be one of {FIRST_LAYERS}, got {self.first_layer!r}"
            )

    @property
    def piece(self) -> int:
        """Rows of W per piece of the first layer: 1 ("columns"), else a power of two no
        larger than the padded rows, so the pieces stay within them."""
        if self.first_layer == "columns":
            return 1
        return min(MLP_CHUNK, _next_power_of_two(self.obs_dim))

    def _pieces(self) -> list[tuple[int, int]]:
        return [(i, min(i + self.piece, self.obs_dim)) for i in range(0, self.obs_dim, self.piece)]

    def prepare(self, inputs, n: int, num_envs: int) -> list:
        return jax.tree.leaves(pad_mlp(jax.tree.unflatten(self.treedef, inputs)))

    def _first_kernels(self) -> tuple[int, ...]:
        """Positions, among the policy's leaves, of the actor's and critic's first kernels."""
        where = jax.tree.unflatten(self.treedef, list(range(self.treedef.num_leaves)))
        nets = [where.actor] + ([] if where.critic is None else [where.critic])
        return tuple(net[0][0] for net in nets)

    def load(self, refs):
        if self.first_layer == "dot":
            return super().load(refs)
        first = self._first_kernels()
        return [r if i in first else r[...] for i, r in enumerate(refs)]  # first: read per row

    def _split(self, w):
        """A first kernel w[rows, H] as `act` reads it: its rows ("columns") or its chunks of
        `piece` rows ("chunks")."""
        if self.first_layer == "columns":
            return [w[i] for i in range(self.obs_dim)]
        return [w[i : i + self.piece] for i, _ in self._pieces()]

    def step_inputs(self, loaded, t) -> list:
        if self.first_layer == "dot":
            return loaded
        first = self._first_kernels()
        return [self._split(w) if j in first else w for j, w in enumerate(loaded)]

    def abstract_step_inputs(self, inputs, width: int):
        if self.first_layer == "dot":
            return inputs
        first = self._first_kernels()
        return [jax.eval_shape(self._split, w) if j in first else w for j, w in enumerate(inputs)]

    def act(self, env, inputs, index, obs):
        if self.first_layer == "dot":
            return super().act(env, inputs, index, obs)
        values, seed = inputs
        policy = jax.tree.unflatten(self.treedef, values)
        columns = [jnp.asarray(c).astype(jnp.float32) for c in env.obs_cells(obs)]
        if len(columns) != self.obs_dim:
            raise ValueError(f"MLPBlock: {len(columns)} observation columns, not {self.obs_dim}")
        if self.first_layer == "chunks":  # each chunk's columns stacked once, for both networks
            zero = jnp.zeros_like(columns[0])
            columns = [
                stack_last([*columns[i:k], *[zero] * (self.piece - (k - i))])
                for i, k in self._pieces()
            ]
        out = _mlp_from_columns(policy.actor, columns)
        value = None if policy.critic is None else _mlp_from_columns(policy.critic, columns)[:, 0]
        return policy.act_from_outputs(seed, index, out, value)

    def obs_columns(self, policy, columns):
        # zero columns meet the zero rows `pad_mlp` gave the first layers
        extra = policy.actor[0][0].shape[0] - len(columns)
        return (*columns, *[jnp.zeros_like(columns[0])] * extra)


def _mlp_from_columns(layers, columns):
    """`policies.mlp_apply(layers, x)` for x given as its [B] columns and the first layer's
    kernel as its rows: the first layer sums `x_i[:, None] * W[i]` over components, the
    others are `mlp_apply`'s."""
    (rows, bias), rest = layers[0], layers[1:]

    def term(col, row):  # a column and a row of W, or a chunk [B, c] and its rows [c, H]
        if col.ndim == 1:
            return col[:, None] * row[None, :]
        return jnp.matmul(col, row, precision=jax.lax.Precision.HIGHEST)

    h = term(columns[0], rows[0])
    for col, row in zip(columns[1:], rows[1:], strict=True):
        h = h + term(col, row)
    h = h + bias
    return mlp_apply(rest, jnp.tanh(h)) if rest else h


def block_policy(policy, mlp_first_layer: str = "dot") -> tuple[BlockPolicy, list]:
    """(how the kernel runs `policy`, the arrays it takes as inputs); an `MLPPolicy`'s first
    layers as `mlp_first_layer` says (`MLPBlock`)."""
    if isinstance(policy, OpenLoopPolicy):
        acts, shape = policy.actions, tuple(policy.actions.shape[2:])
        flat = acts.reshape(*acts.shape[:2], math.prod(shape)) if shape else acts
        return OpenLoopBlock(shape), [flat]
    if isinstance(policy, RandomPolicy):
        return RandomBlock(policy), []
    leaves, treedef = jax.tree.flatten(policy)
    if type(policy) is MLPPolicy:
        obs_dim = policy.actor[0][0].shape[0]
        return MLPBlock(treedef, obs_dim=obs_dim, first_layer=mlp_first_layer), leaves
    return TreeBlock(treedef), leaves


def _next_power_of_two(d: int) -> int:
    return 1 << max(d - 1, 0).bit_length()


def pad_mlp(policy: MLPPolicy) -> MLPPolicy:
    """`policy` with every weight dimension a power of two, the only sizes Triton lowers.

    Weights get zero rows and columns and biases zeros, so every real unit computes what it did
    (hidden units added are tanh(0) = 0 and meet zero rows); the observation gets zero columns
    to match (`BlockPolicy.act`). A Discrete policy's extra logits get bias -inf: probability 0,
    no change to the real actions' log-softmax, and never sampled (`MLPPolicy.act_from_seed`
    draws no action of logit -inf). A Box policy's output, the action itself, keeps its size.
    """

    def pad(layers, head_size, head_fill):
        out = []
        for i, (w, b) in enumerate(layers):
            head = i == len(layers) - 1
            rows = _next_power_of_two(w.shape[0])
            cols = head_size(w.shape[1]) if head else _next_power_of_two(w.shape[1])
            w = jnp.pad(w, ((0, rows - w.shape[0]), (0, cols - w.shape[1])))
            b = jnp.pad(b, (0, cols - b.shape[0]), constant_values=head_fill if head else 0.0)
            out.append((w, b))
        return tuple(out)

    if policy.discrete:
        actor = pad(policy.actor, _next_power_of_two, -jnp.inf)
    else:
        actor = pad(policy.actor, lambda size: size, 0.0)
    critic = None if policy.critic is None else pad(policy.critic, _next_power_of_two, 0.0)
    return policy.replace(actor=actor, critic=critic)


# ---------------------------------------------------------------------------------- the step itself
BLOCK = Lanes(vmapped=False)  # a block's lanes: the environment's functions applied directly


def step(
    env, policy: BlockPolicy, policy_values, params, params_axes, carry, t, seed, draws, fields
):
    """Step `t` of a rollout on a block: `jaxsim.rollout.step.policy_step` on its lanes.

    `t` is the global step (int32), `seed` the policy's per-step seed (a pair of uint32),
    `draws` the block's reset draws (its `index` the environments' global indices [B]),
    `policy_values` what `policy.step_inputs` gave. A function of arrays only (no refs).

    Returns:
      (carry after the step, record): record maps each name in `fields` to its value this step,
      observations as tuples of [B] columns.
    """
    inputs = (policy_values, seed)
    carry, values = policy_step(env, BLOCK, policy, inputs, carry, params, params_axes, t, draws)
    return carry, {name: values[name] for name in fields}


# ------------------------------------------------------------------------ records as [B] columns
def split_columns(x: jax.Array) -> list[jax.Array]:
    """[B, *shape] -> prod(shape) arrays of [B] (the kernel stores rows of B lanes)."""
    b = x.shape[0]
    k = math.prod(x.shape[1:])
    if k == 1:
        return [x.reshape(b)]
    return [c.reshape(b) for c in jnp.split(x.reshape(b, k), k, axis=1)]


def join_columns(columns, shape: tuple[int, ...]) -> jax.Array:
    """Inverse of `split_columns`: k arrays of [...] -> [..., *shape]."""
    if not shape:
        return columns[0]
    return stack_last(columns).reshape(*columns[0].shape, *shape)


def stack_last(columns) -> jax.Array:
    """`jnp.stack(columns, axis=-1)` from two-way stacks, the only kind Triton lowers."""
    k = len(columns)
    if k == 1:
        return columns[0][..., None]
    if k == 2 or k & (k - 1):
        return jnp.stack(columns, axis=-1)
    # Interleave: stacking (c0, c2, ...) with (c1, c3, ...) puts column i at position i.
    pairs = jnp.stack([stack_last(columns[0::2]), stack_last(columns[1::2])], axis=-1)
    return pairs.reshape(*columns[0].shape, k)


def pad_axis(x, size, axis=0):
    """x padded to `size` along `axis` by repeating its last entry (padded lanes stay valid)."""
    if x.shape[axis] == size:
        return x
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, size - x.shape[axis])
    return jnp.pad(x, pad, mode="edge")


def storage_dtype(dtype):
    """Booleans travel as int8: Pallas GPU lowerings store no i1 memory."""
    return jnp.int8 if dtype == jnp.bool_ else dtype


# A record's outputs, in one fixed order: per field (sorted), per leaf. An observation (a tuple
# of columns) is one output [n, num_envs, obs_dim], written a component at a time, so that no
# pass outside the kernel has to stack columns into the `Trajectory` layout.
_OBSERVATIONS = ("next_obs", "obs")


def output_columns(record) -> list[list[jax.Array]]:
    """Each output of a one-step record as its [B] columns."""
    groups = []
    for name in sorted(record):
        if name in _OBSERVATIONS:
            groups.append(list(record[name]))
        else:
            groups += [split_columns(leaf) for leaf in jax.tree.leaves(record[name])]
    return groups


def output_layout(template) -> list[tuple[tuple[int, ...], Any]]:
    """(trailing shape, storage dtype) of each output of a one-step record's shapes.

    An output with trailing shape () is an [n, num_envs] array; with (k,), [n, num_envs, k]
    (k components of one leaf, or of an observation).
    """
    layout = []
    for name in sorted(template):
        if name in _OBSERVATIONS:
            layout.append(((len(template[name]),), jnp.float32))
        else:
            for leaf in jax.tree.leaves(template[name]):
                k = math.prod(leaf.shape[1:])
                layout.append(((k,) if leaf.ndim > 1 else (), storage_dtype(leaf.dtype)))
    return layout


def record_from_outputs(template, outputs) -> dict[str, Any]:
    """The record's fields with leaves [n, num_envs, *shape], from the kernel's outputs."""
    outputs = iter(outputs)
    record = {}
    for name in sorted(template):
        if name in _OBSERVATIONS:
            record[name] = next(outputs)
        else:
            leaves, treedef = jax.tree.flatten(template[name])
            record[name] = treedef.unflatten([_as_leaf(next(outputs), leaf) for leaf in leaves])
    return record


def _as_leaf(output, leaf):
    return output.reshape(*output.shape[:2], *leaf.shape[1:]).astype(leaf.dtype)
