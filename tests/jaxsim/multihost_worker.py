"""One process of a two-process `jax.distributed` run on the loopback interface (CPU, gloo).

`python tests/jaxsim/multihost_worker.py PROCESS_ID PORT OUT.json`, started twice by
tests/jaxsim/test_sharding.py with XLA_FLAGS=--xla_force_host_platform_device_count=2: 2 processes x
2 devices make one 4-device mesh. Each process compares the mesh rollout (gathered to the host)
with the unsharded one it computes on its own first device, runs PPO on the mesh and alone, and
writes what it saw to OUT.json.
"""

from __future__ import annotations

import hashlib
import json
import sys

import jax
import numpy as np
from jax.sharding import Mesh
from mesh_worker import max_gap  # this script's folder, tests/jaxsim/, is first on sys.path

import jaxsim

jax.config.update("jax_cpu_collectives_implementation", "gloo")


def main(process_id: int, port: int, out: str) -> None:
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=process_id)
    mesh = Mesh(np.array(jax.devices()), (jaxsim.ENV_AXIS,))
    env = jaxsim.make("CartPole-v1")
    policy = jaxsim.init_mlp_policy(jax.random.key(1), env)
    kw = dict(num_envs=8, key=jax.random.key(3), backend="scan")
    on_mesh = jaxsim.rollout(env, policy, 40, mesh=mesh, **kw)
    alone = jaxsim.rollout(env, policy, 40, **kw)
    to_host = jaxsim.sharding.to_host
    result = {
        "process_count": jax.process_count(),
        "devices": jax.device_count(),
        "fully_addressable": on_mesh.obs.is_fully_addressable,
        "exact_equal": all(
            np.array_equal(to_host(getattr(on_mesh, f)), np.asarray(getattr(alone, f)))
            for f in ("action", "terminated", "truncated", "episode_length")
        ),
        "obs_gap": float(np.abs(to_host(on_mesh.obs) - np.asarray(alone.obs)).max()),
        "finished_equal": all(
            np.array_equal(x, y)
            for x, y in zip(on_mesh.finished_episodes(), alone.finished_episodes(), strict=True)
        ),
    }
    # Checked mode reads every process's part of the batch.
    stats = jaxsim.rollout(env, policy, 40, mesh=mesh, checks=True, outputs="stats", **kw).stats
    result["stats_count"] = int(to_host(stats.count))
    result["stats_count_alone"] = int(alone.episode_stats().count)

    from agents.ppo import PPO, PPOConfig

    config = PPOConfig(
        total_steps=8 * 16 * 2, num_envs=8, num_steps=16, update_epochs=1, num_minibatches=2,
        hidden=(16, 16), rollout_backend="scan",
    )  # fmt: skip
    weights = []
    for m in (mesh, None):
        agent = PPO(config, env, mesh=m)
        runner, _ = agent.jit_run(config.num_updates, vmapped=False)(
            jax.jit(agent.init)(jax.random.key(0))
        )
        weights.append([to_host(x) for x in jax.tree.leaves(runner.params)])
    digest = hashlib.sha256(b"".join(x.tobytes() for x in weights[0])).hexdigest()
    result["ppo_digest"] = digest
    result["ppo_gap"] = max_gap(*weights)
    with open(out, "w") as f:
        json.dump(result, f)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
