"""Built-in policies: `policy(key, obs[B, ...]) -> action[B, ...]` or `(action, extras)`."""

from __future__ import annotations

import dataclasses
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxsim import rng
from jaxsim.core import Env
from jaxsim.spaces import Box, Discrete, Space

# Public: the built-in policies, and the MLP layers (`init_mlp`, `mlp_apply`, `flat_obs`) that
# the agents' networks are built from, so a policy network and a kernel's in-kernel MLP agree.
__all__ = [
    "MLPPolicy",
    "OpenLoopPolicy",
    "RandomPolicy",
    "flat_obs",
    "init_mlp",
    "init_mlp_policy",
    "mlp_apply",
    "orthogonal_init",
    "random_policy",
    "split_policy_output",
]


def split_policy_output(out):
    """A policy's output as (action, extras): extras are {} for a policy returning an action."""
    if isinstance(out, tuple):
        if len(out) != 2:
            raise ValueError(
                f"rollout: policy must return action or (action, extras), got a {len(out)}-tuple"
            )
        return out
    return out, {}


@dataclasses.dataclass(frozen=True)
class RandomPolicy:
    """Uniform random actions for any Discrete or Box space, drawn with counter-based randomness.

    The key given at each step is turned into one seed for the whole batch; environment `i` then
    draws `rng.bits(seed, i, 0, POLICY_STREAM + j)` for action component `j`, so a fused kernel can
    reproduce the same actions from the same per-step seed.
    """

    action_space: Space

    def __call__(self, key: jax.Array, obs: jax.Array) -> jax.Array:
        return self.from_seed(rng.seed_from_key(key), jnp.arange(obs.shape[0], dtype=jnp.uint32))

    def act_from_seed(self, seed, index, obs) -> jax.Array:
        """What `__call__` does given the key's seed: the form rollouts and kernels use."""
        del obs
        return self.from_seed(seed, index)

    def from_seed(self, seed, index) -> jax.Array:
        """Actions for environments `index[...]` -> action[..., *shape]."""
        space = self.action_space
        if isinstance(space, Discrete):
            return space.from_bits(rng.bits(seed, index, 0, rng.POLICY_STREAM))
        component = jnp.arange(space.size, dtype=jnp.uint32)
        stream = rng.POLICY_STREAM + 2 * component
        b1 = rng.bits(seed, index[..., None], 0, stream)
        b2 = rng.bits(seed, index[..., None], 0, stream + 1)
        shape = (*jnp.shape(index), *space.shape)
        return space.from_bits(b1.reshape(shape), b2.reshape(shape))


def random_policy(env: Env, params=None) -> RandomPolicy:
    """The uniform random policy over `env`'s action space."""
    params = env.default_params if params is None else params
    space = env.action_space(params)
    if not isinstance(space, Discrete | Box):
        raise TypeError(f"random_policy: unsupported action space {space!r}")
    return RandomPolicy(space)


@struct.dataclass
class OpenLoopPolicy:
    """Plays pre-recorded actions, ignoring observations: `actions[t, i]` at step t in env i.

    `jaxsim.rollout(env, OpenLoopPolicy(actions), n, num_envs=actions.shape[1])` plays
    `actions[t]` at step t, for t < n, on the scan and fused backends alike: both hand it the
    step (the scan takes `actions[t]` as its step input, the fused kernel reads row t). A bare
    `policy(key, obs)` call carries no step, so it raises; index `policy.actions[t]` instead.
    """

    actions: jax.Array  # [>= n, num_envs, *action_shape], the action space's dtype

    def check(self, space: Space, n: int, num_envs: int) -> None:
        """Raises ValueError unless the actions fit a rollout of `n` steps of `num_envs`."""
        expected = (num_envs, *space.shape)
        a = self.actions
        if a.ndim < 2 or tuple(a.shape[1:]) != expected or a.shape[0] < n or a.dtype != space.dtype:
            raise ValueError(
                f"OpenLoopPolicy: actions of shape {tuple(a.shape)} and dtype {a.dtype} do not fit "
                f"a rollout of n={n} steps of num_envs={num_envs} with action space {space}: "
                f"they need shape (>= {n}, {', '.join(map(str, expected))}) and dtype "
                f"{jnp.dtype(space.dtype).name}"
            )

    def __call__(self, key: jax.Array, obs: jax.Array) -> jax.Array:
        raise TypeError(
            "OpenLoopPolicy has no action for a (key, obs) call, which carries no step: "
            "jaxsim.rollout plays actions[t] at step t; outside a rollout, use policy.actions[t]"
        )


def mlp_apply(layers, x, activation=jnp.tanh):
    """x[..., in] -> [..., out] through ((kernel[in, out], bias[out]), ...) layers.

    `activation` (tanh) after every layer but the last, which is linear. Products in full
    float32: GPUs default to TF32 for float32 matmuls, which XLA (scan backend) and Triton
    (fused backend) round differently (~1e-3 apart).
    """
    for i, (w, b) in enumerate(layers):
        x = jnp.matmul(x, w, precision=jax.lax.Precision.HIGHEST) + b
        if i < len(layers) - 1:
            x = activation(x)
    return x


def init_mlp(key: jax.Array, sizes, gains):
    """Orthogonal kernels (the distribution of `orthogonal_init`, no LAPACK), zero biases, float32.

    Every layer's Gaussian matrix comes from one draw and all are orthogonalised in one loop
    (layers padded to the widest), so an MLP's init compiles as one random draw and one loop
    instead of one of each per layer; the numbers differ from per-layer `orthogonal_init` calls.

    Args:
      key: PRNG key.
      sizes: widths from input to output, e.g. (obs_dim, 64, 64, num_actions).
      gains: one orthogonal gain per layer (len(sizes) - 1 of them).

    Returns:
      ((kernel[sizes[i], sizes[i + 1]], bias[sizes[i + 1]]), ...).
    """
    if len(gains) != len(sizes) - 1:
        raise ValueError(f"init_mlp: {len(sizes) - 1} layers need as many gains, got {gains!r}")
    shapes = [(max(n_in, n_out), min(n_in, n_out)) for n_in, n_out in itertools.pairwise(sizes)]
    rows, cols = max(r for r, _ in shapes), max(c for _, c in shapes)
    a = jax.random.normal(key, (len(shapes), rows, cols), jnp.float32)
    # Rows past a layer's own are zero, so they change no inner product; columns past its own
    # are orthogonalised after its own and then dropped, so they change nothing either.
    height = jnp.array([r for r, _ in shapes])[:, None, None]
    q = jax.vmap(_gram_schmidt)(jnp.where(jnp.arange(rows)[:, None] < height, a, 0.0))
    layers = []
    for i, ((r, c), (n_in, n_out)) in enumerate(
        zip(shapes, itertools.pairwise(sizes), strict=True)
    ):
        kernel = q[i, :r, :c] if n_in >= n_out else q[i, :r, :c].T
        layers.append((gains[i] * kernel, jnp.zeros((n_out,), jnp.float32)))
    return tuple(layers)


_HALF_LOG_2PI = float(0.5 * np.log(2 * np.pi))


def _select(x, index):
    """x[..., index[...]] over the last axis, as a one-hot select and sum (no gather)."""
    hit = jnp.arange(x.shape[-1], dtype=jnp.int32) == index[..., None]
    return jnp.sum(jnp.where(hit, x, 0.0), axis=-1)


def _sample_categorical(logits, logp_all, u):
    """Inverse-CDF sampling: logits[..., n], log-softmax[..., n], u[...] in [0, 1) -> int32[...].

    The action is the number of cumulative probabilities <= u, clamped to the last action whose
    logit is not -inf: the CDF is non-decreasing, so this equals counting over its first n - 1
    entries, with neither a slice nor a gather (which a Triton kernel cannot lower), and an
    action of logit -inf (probability 0, as the fused backend's padded actions have) is never
    drawn, even where rounding leaves the CDF's total below u.
    """
    cdf = jnp.cumsum(jnp.exp(logp_all), axis=-1)
    count = jnp.sum(cdf <= u[..., None], axis=-1).astype(jnp.int32)
    action_index = jnp.arange(logits.shape[-1], dtype=jnp.int32)
    last = jnp.max(jnp.where(logits > -jnp.inf, action_index, 0), axis=-1)
    return jnp.minimum(count, last)


def flat_obs(obs: jax.Array, batch_ndim: int) -> jax.Array:
    """obs[*batch, *obs_shape] -> obs[*batch, obs_dim], the MLP's input (vectors unchanged).

    Image-like observations (MinAtar's [10, 10, 4]) enter an MLP flattened, and an observation
    of another dtype than float (MinAtar's bool cells, the fused kernel's int32 cells) as float32.
    """
    if not jnp.issubdtype(obs.dtype, jnp.floating):
        obs = obs.astype(jnp.float32)
    if obs.ndim == batch_ndim + 1:
        return obs
    return obs.reshape(*obs.shape[:batch_ndim], -1)


@struct.dataclass
class MLPPolicy:
    """A small actor(-critic) MLP whose sampling uses counter-based randomness.

    Categorical over logits for a Discrete space (sampled by inverting the CDF with one uniform);
    a diagonal Gaussian with state-independent `log_std` for a Box space (actions are the raw
    samples: the environments clip to their bounds, and log-probabilities stay exact). Extras
    are `log_prob` and, with a critic, `value`. Weights are pytree leaves, so `jaxsim.rollout`
    passes them as arguments and new weights reuse the compiled rollout.

    `act_from_seed` is elementwise over the batch, the form a fused kernel evaluates on a block;
    it uses no gather or slice, so the kernel's Triton lowering takes it (the fused backend pads
    its arrays to power-of-two sizes). A Discrete action whose logit is -inf is never sampled.
    """

    actor: tuple  # ((kernel[in, out], bias[out]), ...): logits[n] or mean[action_dim]
    critic: tuple | None = None  # ((kernel, bias), ...) -> value[1]
    log_std: jax.Array | None = None  # [action_dim], Box only
    deterministic: bool = struct.field(pytree_node=False, default=False)

    @property
    def discrete(self) -> bool:
        return self.log_std is None

    def __call__(self, key: jax.Array, obs: jax.Array):
        index = jnp.arange(obs.shape[0], dtype=jnp.uint32)
        return self.act_from_seed(rng.seed_from_key(key), index, obs)

    def act_from_seed(self, seed, index, obs):
        """obs[B, *obs_shape], index[B] -> (action[B, ...], extras of [B])."""
        obs = flat_obs(obs, 1)
        value = None if self.critic is None else mlp_apply(self.critic, obs)[..., 0]
        return self.act_from_outputs(seed, index, mlp_apply(self.actor, obs), value)

    def act_from_outputs(self, seed, index, out, value=None):
        """`act_from_seed` from the networks' outputs: the actor's out[B, n] (logits or mean)
        and the critic's value[B] (None without a critic). The fused kernel computes the
        networks in its own layout (`jaxsim.fused.block.MLPBlock`) and samples here."""
        if self.discrete:
            logp_all = jax.nn.log_softmax(out)
            if self.deterministic:
                action = jnp.argmax(out, axis=-1).astype(jnp.int32)
            else:
                u = rng.uniform(seed, index, 0, rng.POLICY_STREAM)
                action = _sample_categorical(out, logp_all, u)
            log_prob = _select(logp_all, action)
        else:
            if self.deterministic:
                z = jnp.zeros_like(out)
            else:
                component = jnp.arange(out.shape[-1], dtype=jnp.uint32)
                stream = rng.POLICY_STREAM + 2 * component
                i = index[..., None]
                z = rng.to_normal(rng.bits(seed, i, 0, stream), rng.bits(seed, i, 0, stream + 1))
            action = out + jnp.exp(self.log_std) * z
            log_prob = jnp.sum(-0.5 * z**2 - self.log_std - _HALF_LOG_2PI, axis=-1)
        extras = {"log_prob": log_prob}
        if value is not None:
            extras["value"] = value
        return action, extras

    def evaluate(self, obs, action):
        """(log_prob[B], entropy[B], value[B] or None) of given actions: what losses need.

        `obs[*B, *obs_shape]` and `action[*B, ...]` may have any number of batch axes B.
        """
        obs = flat_obs(obs, action.ndim if self.discrete else action.ndim - 1)
        out = mlp_apply(self.actor, obs)
        if self.discrete:
            logp_all = jax.nn.log_softmax(out)
            log_prob = _select(logp_all, action.astype(jnp.int32))
            entropy = -jnp.sum(jnp.exp(logp_all) * logp_all, axis=-1)
        else:
            z = (action - out) * jnp.exp(-self.log_std)
            log_prob = jnp.sum(-0.5 * z**2 - self.log_std - _HALF_LOG_2PI, axis=-1)
            entropy = jnp.broadcast_to(jnp.sum(self.log_std + 0.5 + _HALF_LOG_2PI), log_prob.shape)
        value = None if self.critic is None else mlp_apply(self.critic, obs)[..., 0]
        return log_prob, entropy, value


def orthogonal_init(gain: float = 1.0):
    """Orthogonal kernel init (the distribution of flax's `orthogonal`) without LAPACK.

    flax's version calls LAPACK's geqrf, which on CPU is OpenBLAS; XLA runs the per-seed QRs of
    a vmapped init on several threads at once, and concurrent OpenBLAS calls have been seen to
    hang forever there. Gram-Schmidt, done twice for float32 accuracy, gives the same Q (the QR
    factor with a positive diagonal of R) with matmuls only.
    """

    def init(key, shape, dtype=jnp.float32):
        rows, cols = shape
        a = jax.random.normal(key, (max(rows, cols), min(rows, cols)), jnp.float32)
        q = _gram_schmidt(a)
        q = q if rows >= cols else q.T
        return (gain * q).astype(dtype)

    return init


def _gram_schmidt(a: jax.Array) -> jax.Array:
    """a[m, n] (m >= n) -> Q[m, n] with orthonormal columns, the QR factor whose R has a positive
    diagonal; column j depends only on columns <= j. Done twice for float32 accuracy."""
    index = jnp.arange(a.shape[1])

    def column(j, q):
        earlier = (index < j).astype(q.dtype)
        v = q[:, j]
        v = v - q @ ((q.T @ v) * earlier)
        v = v - q @ ((q.T @ v) * earlier)
        return q.at[:, j].set(v / jnp.linalg.norm(v))

    return jax.lax.fori_loop(0, a.shape[1], column, a)


def init_mlp_policy(
    key: jax.Array,
    env: Env,
    params=None,
    hidden: tuple[int, ...] = (64, 64),
    critic: bool = True,
    log_std: float = 0.0,
) -> MLPPolicy:
    """An MLPPolicy for `env`, orthogonal init (gains: sqrt 2 hidden, 0.01 actor, 1 critic)."""
    params = env.default_params if params is None else params
    obs_dim = math.prod(env.observation_space(params).shape)
    space = env.action_space(params)
    out_dim = space.n if isinstance(space, Discrete) else space.size

    def layers(key, sizes, head_gain):
        return init_mlp(key, sizes, [np.sqrt(2.0)] * (len(sizes) - 2) + [head_gain])

    k_actor, k_critic = jax.random.split(key)
    return MLPPolicy(
        actor=layers(k_actor, (obs_dim, *hidden, out_dim), 0.01),
        critic=layers(k_critic, (obs_dim, *hidden, 1), 1.0) if critic else None,
        log_std=None if isinstance(space, Discrete) else jnp.full((out_dim,), log_std, jnp.float32),
    )
