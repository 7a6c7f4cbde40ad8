"""The learner: PPO's one-jit update (`PPOLearner.learn`) on segments; V-trace; checkpoints."""

from __future__ import annotations

import json
import os
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization, struct

from agents import checkpoint
from agents.agent import compiler_options
from agents.decoupled.actor import ActingParams, Segment
from agents.decoupled.host_envs import EXTRA_INSTALL
from agents.ppo import PPOConfig, PPOLearner
from agents.structs import LossInfo, TrainState
from atomicfiles import atomic_write, finite_json, write_json_atomic

FORMAT = "jaxsim-agents-ppo-decoupled/1"


@struct.dataclass
class LearnerState:
    """Everything the learner carries between updates (the environments live in the actors)."""

    params: Any
    opt_state: Any
    obs_stats: Any
    reward_state: Any
    key: jax.Array
    update: jax.Array  # int32: updates done


def import_rlax():
    """rlax, imported quietly (its TensorFlow Probability dependency warns on import under
    newer JAX); a MissingDependency-style ImportError naming the extra if it is absent."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import rlax
    except ImportError as e:
        raise ImportError(
            f"the free-running schedule's V-trace needs rlax, which is not installed ({e}): "
            f"{EXTRA_INSTALL}"
        ) from None
    return rlax


def vtrace_advantages(gamma: float, lambda_: float, clip_rho: float = 1.0) -> Any:
    """`advantages` for `PPOLearner.learn` by V-trace (IMPALA), for segments acted with older
    parameters than the learner's.

    Value targets are rlax's V-trace `vs` with per-step lambda cut to 0 at every episode end,
    so the recursion stops there while a truncated step still bootstraps from the critic at its
    true next observation. The policy-gradient advantage is `min(rho, clip) * (r + gamma * (1 -
    terminated) * q_next - V(x))`, with q_next the next step's lambda-mixed target, or V at the
    true next observation where the episode ended or the segment stops. rlax's
    `vtrace_td_error_and_advantage` is not used for it: it bootstraps from `v_tm1[t + 1]`,
    which after a same-step auto-reset is the next episode's first observation.
    """
    rlax = import_rlax()

    def one_lane(value, next_value, reward, discount, rho, lam):
        errors = rlax.vtrace(value, next_value, reward, discount, rho, lam, clip_rho)
        vs = errors + value
        q_next = jnp.concatenate(
            [lam[:-1] * vs[1:] + (1.0 - lam[:-1]) * value[1:], next_value[-1:]]
        )
        q_next = jnp.where(lam > 0, q_next, next_value)
        pg = jnp.minimum(rho, clip_rho) * (reward + discount * q_next - value)
        return pg, vs

    def advantages(policy, traj: Segment, reward):
        log_prob, _, value = policy.evaluate(traj.obs, traj.action)
        _, _, next_value = policy.evaluate(traj.next_obs, traj.action)
        rho = jnp.exp(log_prob - traj.extras["log_prob"])
        done = traj.terminated | traj.truncated
        discount = gamma * (1.0 - traj.terminated.astype(jnp.float32))
        lam = lambda_ * (1.0 - done.astype(jnp.float32))
        value, next_value, rho = (jax.lax.stop_gradient(x) for x in (value, next_value, rho))
        pg, vs = jax.vmap(one_lane, in_axes=1, out_axes=1)(
            value, next_value, reward, discount, rho, lam
        )
        return pg, vs, value

    return advantages


class HostPPO:
    """PPO's learner on spaces alone: `init(key)`, `update(state, segment)` (one jit),
    `acting(state)` (what actors get). It holds a `PPOLearner`, as `agents.ppo.PPO` does."""

    def __init__(self, config: PPOConfig, obs_space, action_space, env_id: str, vtrace: bool):
        self.config = config
        self.learner = PPOLearner(config, obs_space, action_space, env_id)
        self.advantages = vtrace_advantages(config.gamma, config.gae_lambda) if vtrace else None
        self.update = jax.jit(self._update, compiler_options=compiler_options())
        # One program (kept by the compilation cache) instead of a compile per eager op: ~2 s
        # of a warm CartPole run's start-up on 2 loaded cores.
        self.init = jax.jit(self._init, compiler_options=compiler_options())

    def _init(self, key: jax.Array) -> LearnerState:
        k_net, k_run = jax.random.split(key)
        learner = self.learner
        params = learner.init_params(k_net)
        return LearnerState(
            params=params,
            opt_state=learner.optimizer.init(params),
            obs_stats=learner.obs_norm.init(),
            reward_state=learner.reward_scaler.init(),
            key=k_run,
            update=jnp.int32(0),
        )

    def acting(self, state: LearnerState) -> ActingParams:
        return ActingParams(state.params, state.obs_stats if self.config.normalize_obs else None)

    def _update(self, state: LearnerState, segment: Segment) -> tuple[LearnerState, LossInfo]:
        key, k_epochs = jax.random.split(state.key)
        train, obs_stats, reward_state, info = self.learner.learn(
            TrainState(state.params, state.opt_state),
            state.obs_stats,
            state.reward_state,
            segment,
            k_epochs,
            self.advantages,
        )
        new = LearnerState(
            train.params, train.opt_state, obs_stats, reward_state, key, state.update + 1
        )
        return new, info


# ---------------------------------------------------------------------------------- checkpoints
def save_state(path: str, state: LearnerState, meta: dict[str, Any]) -> None:
    """The learner's state and `meta` in one msgpack file, replaced atomically (+ config.json)."""
    state = state.replace(key=jax.random.key_data(state.key))
    meta = {"format": FORMAT, "update": int(state.update), **meta}
    payload = {
        "meta": json.dumps(finite_json(meta), allow_nan=False),
        "state": serialization.to_state_dict(jax.device_get(state)),
    }
    atomic_write(path, serialization.msgpack_serialize(payload))
    sidecar = os.path.join(os.path.dirname(os.path.abspath(path)), "config.json")
    write_json_atomic(sidecar, finite_json(meta))


def _read(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return checkpoint.decode(path, (FORMAT,), "decoupled checkpoint")


def read_meta(path: str) -> dict[str, Any]:
    """The metadata of `save_state`'s file; a ValueError naming the file if it is not one."""
    return _read(path)[0]


def load_state(path: str, learner: HostPPO) -> tuple[LearnerState, dict[str, Any]]:
    """(state, meta) from `save_state`'s file; a ValueError naming the file if it is not one."""
    meta, state = _read(path)
    template = learner.init(jax.random.key(0))
    template = template.replace(key=jax.random.key_data(template.key))
    try:
        restored = serialization.from_state_dict(template, state)
    except Exception as e:  # flax's errors for a tree of another layout
        raise ValueError(f"{path}: not a state of this config ({type(e).__name__}: {e})") from None

    def check(t, x):
        x = np.asarray(x)
        if x.shape != t.shape:
            raise ValueError(f"{path}: array of shape {x.shape} where the config needs {t.shape}")
        return jnp.asarray(x, t.dtype)

    state = jax.tree.map(check, template, restored)
    return state.replace(key=jax.random.wrap_key_data(state.key)), meta
