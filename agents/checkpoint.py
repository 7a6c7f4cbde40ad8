"""Checkpoints without pickle: one msgpack file (arrays + JSON metadata), replaced atomically.

The file holds an agent's whole runner state (parameters, optimiser state, normaliser state or
replay buffer, the environments in progress and the PRNG key), its config, the algorithm, the
environment id and the update count, so a resumed run continues bit for bit. Arrays are stored
as raw bytes at their dtype: a replay buffer of 1e5 CartPole transitions is ~4.4 MB per seed.
A `config.json` beside it is for people: it mirrors the checkpoint's metadata, and
`sync_sidecar` restores it from the checkpoint when a run was killed between the two writes.

    env, policy = agents.load_policy("runs/cartpole/checkpoint.msgpack")
    traj = jaxsim.rollout(env, policy, 500, num_envs=8)
"""

from __future__ import annotations

import json
import os
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization

import jaxsim
from agents.agent import Agent
from agents.algorithms import ALGORITHMS, agent_type
from atomicfiles import atomic_write, finite_json, write_json_atomic

# ppo/2: parameters are plain (kernel, bias) layers ({"actor", "critic", "log_std"}), no longer
# flax module variables ({"params": {"actor_0": ...}}); ppo/3: the optimiser state is over the
# flattened parameters (optax.flatten). Older files are refused by name.
FORMATS = {
    "ppo": "jaxsim-agents-ppo/3",
    "dqn": "jaxsim-agents-dqn/1",
    "sac": "jaxsim-agents-sac/1",
    "pqn": "jaxsim-agents-pqn/1",
    "ppo_rnn": "jaxsim-agents-ppo_rnn/1",
}
assert set(FORMATS) == set(ALGORITHMS)


class Checkpoint(NamedTuple):
    runner: Any  # the agent's runner; leaves have a leading seed axis if meta["num_seeds"] is set
    config: Any  # the agent's config dataclass
    env: jaxsim.Env
    agent: Agent
    meta: dict[str, Any]


def _is_key(x) -> bool:
    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def sampler_ranges(sampler) -> dict[str, list] | None:
    """A `jaxsim.uniform_params` sampler as JSON, {field: [low, high]} (None: no sampler);
    `jaxsim.uniform_params(env, **ranges)` rebuilds it. Other samplers cannot be recorded."""
    if sampler is None:
        return None
    if not isinstance(sampler, jaxsim.UniformParams):
        raise TypeError(
            "params_sampler: a checkpoint records a jaxsim.uniform_params sampler only (it is "
            f"rebuilt from its ranges), got {type(sampler).__name__}"
        )
    return {n: [_plain(sampler.low[n]), _plain(sampler.high[n])] for n in sampler.fields}


def _plain(value):
    # float32/int32 values as the shortest Python numbers that read back as them (0.05, not
    # 0.05000000074505806), nested lists for array bounds.
    value = np.asarray(value)
    if value.ndim:
        return [_plain(v) for v in value]
    return int(value) if value.dtype.kind in "iu" else float(str(value))


def save_checkpoint(
    path: str,
    runner: Any,
    config: Any,
    env: jaxsim.Env,
    num_seeds: int | None,
    extra: dict[str, Any] | None = None,
    params_sampler=None,
) -> None:
    """Saves `runner` (a single run, or `num_seeds` stacked ones) and its config to `path`.

    The algorithm is the one whose config `config` is (`agents.algorithms.ALGORITHMS`).

    The environment is recorded as its id and its `make` arguments, static config and params
    overrides (`jaxsim.make(id, **overrides)` rebuilds it); the training rollouts' params
    sampler, a `jaxsim.uniform_params` one (the runner's environments carry its draws), as
    `uniform_params` ranges (`sampler_ranges`); `extra` (JSON-serialisable) joins the metadata.
    """
    runner = jax.tree.map(lambda x: jax.random.key_data(x) if _is_key(x) else x, runner)
    state = serialization.to_state_dict(jax.device_get(runner))
    update = np.asarray(runner.update).reshape(-1)[0]
    algorithm = next(n for n in ALGORITHMS if agent_type(n).config_type is type(config))
    meta = {
        "format": FORMATS[algorithm],
        "algorithm": algorithm,
        "env_id": env.id,
        "env_overrides": env.make_kwargs(),
        "uniform_params": sampler_ranges(params_sampler),
        "num_seeds": num_seeds,
        "update": int(update),
        "steps": int(update) * config.steps_per_update,
        "config": config.to_dict(),
        "jax_version": jax.__version__,
        **(extra or {}),
    }
    payload = {"meta": json.dumps(finite_json(meta), allow_nan=False), "state": state}
    atomic_write(path, serialization.msgpack_serialize(payload))
    write_json_atomic(_sidecar(path), finite_json(meta))


def _sidecar(path: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(path)), "config.json")


def read_meta(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metadata, state dict) of a checkpoint file; a ValueError naming it if it is corrupt."""
    return decode(path, tuple(FORMATS.values()), "checkpoint this version reads")


def decode(path: str, formats: tuple[str, ...], kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metadata, state dict) of a msgpack checkpoint whose format is one of `formats` (the
    agents' and the decoupled learner's); a ValueError naming the file if it is corrupt, or
    'not a `kind`' if it is another format."""
    try:
        with open(path, "rb") as f:
            payload = serialization.msgpack_restore(f.read())
        meta = json.loads(payload["meta"])
        state = payload["state"]
    except Exception as e:  # msgpack's, JSON's and layout errors all mean the same here
        raise ValueError(
            f"{path}: corrupt checkpoint, it could not be decoded ({type(e).__name__}: {e}); "
            "delete it to train from scratch, or restore it from a copy"
        ) from None
    found = meta.get("format") if isinstance(meta, dict) else meta
    if found not in formats:
        raise ValueError(f"{path}: not a {kind} (format {found!r}; it reads {', '.join(formats)})")
    return meta, state


def sync_sidecar(path: str) -> bool:
    """Rewrites config.json from the checkpoint at `path` if it differs; True if it did."""
    if not os.path.exists(path):
        return False
    meta, _ = read_meta(path)
    sidecar = _sidecar(path)
    try:
        with open(sidecar) as f:
            if json.load(f) == finite_json(meta):
                return False
    except (OSError, ValueError):
        pass
    write_json_atomic(sidecar, finite_json(meta))
    return True


def load_checkpoint(path: str, env: jaxsim.Env | None = None) -> Checkpoint:
    """Restores a checkpoint. `env` is needed only for environments outside jaxsim.make."""
    meta, state = read_meta(path)
    algorithm = next(n for n, f in FORMATS.items() if f == meta["format"])
    meta.setdefault("algorithm", algorithm)  # ppo/2 files written before DQN and SAC existed
    cls = agent_type(algorithm)
    config = cls.config_type.from_dict(meta["config"])
    if env is None:
        env = jaxsim.make(meta["env_id"], **meta["env_overrides"])
    elif env.id != meta["env_id"]:
        raise ValueError(f"{path}: saved for {meta['env_id']}, but env is {env.id}")
    ranges = meta.get("uniform_params")  # absent from checkpoints written before samplers
    sampler = jaxsim.uniform_params(env, **ranges) if ranges else None
    agent = cls(config, env, params_sampler=sampler)
    num_seeds = meta["num_seeds"]
    if num_seeds is None:
        template = jax.eval_shape(agent.init, jax.random.key(0))
    else:
        keys = jax.random.split(jax.random.key(0), num_seeds)
        template = jax.eval_shape(jax.vmap(agent.init), keys)
    restored = serialization.from_state_dict(template, state)

    def check(t, x):
        x = np.asarray(x)
        shape = (*t.shape, *jax.random.key_data(jax.random.key(0)).shape) if _is_key(t) else t.shape
        if x.shape != shape:
            raise ValueError(f"{path}: array of shape {x.shape} where the config needs {shape}")
        return jax.random.wrap_key_data(jnp.asarray(x)) if _is_key(t) else jnp.asarray(x, t.dtype)

    runner = jax.tree.map(check, template, restored)
    return Checkpoint(runner, config, env, agent, meta)


def load_policy(
    path: str, seed: int = 0, deterministic: bool = True, env: jaxsim.Env | None = None
) -> tuple[jaxsim.Env, Any]:
    """(env, policy) from a checkpoint, ready for `jaxsim.rollout(env, policy, n)`.

    Args:
      path: a file written by `save_checkpoint`.
      seed: which seed's policy, for a multi-seed checkpoint.
      deterministic: argmax / mean actions (as in evaluation) instead of samples.
      env: needed only for environments outside `jaxsim.make`.
    """
    ckpt = load_checkpoint(path, env)
    runner = ckpt.runner
    if ckpt.meta["num_seeds"] is not None:
        runner = jax.tree.map(lambda x: x[seed], runner)
    return ckpt.env, ckpt.agent.policy(runner, deterministic)
