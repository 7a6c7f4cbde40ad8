"""The GPU figure of `benchmarks.ppo`: PPO training env-steps/s on CartPole, scan vs fused."""

from __future__ import annotations

import statistics
import time
import traceback

import jax

import jaxsim
from agents.ppo import PPO
from agents.presets import config_for


def gpu_training_sps(num_envs: int, updates: int) -> dict:
    """Training env-steps/s on CartPole with `num_envs` envs, scan against fused rollout."""
    if jax.default_backend() != "gpu":
        return {"status": "unmeasured", "reason": f"no GPU: jax backend is {jax.default_backend()}"}
    out = {"status": "measured", "num_envs": num_envs, "updates_per_call": updates}
    for backend in ("scan", "fused"):
        config = config_for(
            "CartPole-v1",
            num_envs=num_envs,
            num_steps=128,
            num_minibatches=32,
            update_epochs=4,  # purejaxrl's, as the figures recorded before the rl-zoo preset
            total_steps=num_envs * 128 * updates,
            rollout_backend=backend,
        )
        try:
            agent = PPO(config, jaxsim.make("CartPole-v1"))
            runner = jax.jit(agent.init)(jax.random.key(0))
            fn = jax.jit(lambda r, agent=agent: agent.run(r, updates))
            t0 = time.perf_counter()
            runner, _ = jax.block_until_ready(fn(runner))
            compile_s = time.perf_counter() - t0
            samples = []
            for _ in range(3):
                t0 = time.perf_counter()
                runner, _ = jax.block_until_ready(fn(runner))
                samples.append(time.perf_counter() - t0)
            sps = num_envs * 128 * updates / statistics.median(samples)
            out[backend] = {"sps": sps, "first_call_s": compile_s, "samples_s": samples}
        except Exception as e:  # the fused backend may not serve this policy or these outputs yet
            out[backend] = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
    return out
