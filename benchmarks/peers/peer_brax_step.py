"""brax's environment stepped alone, as its trainers step it, no learning; prints one JSON result.

The floor under a brax trainer's rate. It imports only brax, jax and numpy (never this
repository, nor brax's trainers), so it runs under the brax peer venv (jax < 0.10) and under
jaxsim's own venv (jax >= 0.10, where brax's trainers fail but its environments run): the two
runs show what the jax version alone does to brax's step (`measure.step_rows`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

T0 = time.perf_counter()

import jax  # noqa: E402
import numpy as np  # noqa: E402
from brax import envs  # noqa: E402

IMPORT_S = time.perf_counter() - T0


def step_speed(env_name: str, num_envs: int, steps: int, repeats: int, episode_length: int):
    """Env-steps/s of brax's environment alone: `envs.training.wrap` (its trainers' episode
    limit and auto-reset), uniform random actions, `steps` steps of `num_envs` envs per jitted
    call (a `lax.scan` keeping rewards and dones, as `measure.step_rows`' jaxsim rollout keeps
    rewards), each call continuing the last; after two warm-up calls, the median of `repeats`.
    XLA's default compile options."""
    env = envs.training.wrap(envs.get_environment(env_name), episode_length=episode_length)

    @jax.jit
    def call(state, key):
        def body(state, key):
            action = jax.random.uniform(key, (num_envs, env.action_size), minval=-1, maxval=1)
            state = env.step(state, action)
            return state, (state.reward, state.done)

        state, (reward, done) = jax.lax.scan(body, state, jax.random.split(key, steps))
        return state, reward.sum(), done.sum()

    state = jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(0), num_envs))
    # Two calls before timing: reset's state and a step's differ in type (weak types), so the
    # second call compiles again (~20 s for ant); the timed calls then take a call's own output.
    warmup = []
    for i in range(2):
        t = time.perf_counter()
        state, reward, _ = jax.block_until_ready(call(state, jax.random.PRNGKey(100 + i)))
        warmup.append(time.perf_counter() - t)
        if not np.isfinite(float(reward)):
            raise RuntimeError(f"{env_name}: non-finite rewards from brax's step")
    walls = []
    for i in range(repeats):
        t = time.perf_counter()
        state, _, _ = jax.block_until_ready(call(state, jax.random.PRNGKey(2 + i)))
        walls.append(time.perf_counter() - t)
    return {
        "num_envs": num_envs,
        "steps_per_call": steps,
        "call_wall_s": walls,
        "sps": num_envs * steps / float(np.median(walls)),
        "warmup_call_s": warmup,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--env", required=True, help="a brax environment name (ant, ...)")
    p.add_argument("--num-envs", type=int, required=True)
    p.add_argument("--steps", type=int, default=16, help="steps per call")
    p.add_argument("--repeats", type=int, default=3, help="timed calls")
    p.add_argument("--episode-length", type=int, default=1000, help="the trainers' limit")
    a = p.parse_args()
    load_before = os.getloadavg()[0]
    out = step_speed(a.env, a.num_envs, a.steps, a.repeats, a.episode_length)
    import brax

    out.update(
        mode="step",
        env=a.env,
        load_before=load_before,
        load_after=os.getloadavg()[0],
        import_s=IMPORT_S,
        process_wall_s=time.perf_counter() - T0,
        versions={
            "jax": jax.__version__,
            "brax": brax.__version__,
            "python": sys.version.split()[0],
        },
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
