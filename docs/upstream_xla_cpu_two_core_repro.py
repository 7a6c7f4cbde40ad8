"""Minimal reproduction: a small jitted step, called synchronously from Python in a loop, runs
slower on two cores than pinned to one (jax only, no jaxsim).

Each step is what a vectorised-environment front does: numpy actions in, one jitted batch step of
a CartPole-like system (4096 lanes; terminated lanes reset from a counter hash), one packed
float32 output buffer out and read with np.asarray. Each configuration runs in its own process:

  python docs/upstream_xla_cpu_two_core_repro.py [ROUNDS]  # every configuration, ROUNDS rounds
  python docs/upstream_xla_cpu_two_core_repro.py child plain  # one process (env vars set it)

Configurations: "as started" (no setting), "pinned" (`os.sched_setaffinity(0, {0})` before jax
starts), "NPROC=1" (environment variable read by XLA when it sizes its CPU thread pools), and
the step's program written as a length-1 `lax.scan` or a `lax.while_loop` with a trip count
known only at run time (one control-flow thunk around the step's kernels).
"""

import json
import os
import subprocess
import sys
import time

N = 4096
STEPS = 300
REPEATS = 7


def child(variant: str) -> dict:
    if os.environ.get("REPRO_PIN"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import jax
    import jax.numpy as jnp
    import numpy as np

    jax.config.update("jax_cpu_enable_async_dispatch", os.environ.get("REPRO_ASYNC") == "1")

    def hash_uniform(counter, lane, salt):
        x = counter * jnp.uint32(0x9E3779B9) ^ lane * jnp.uint32(0x85EBCA6B) ^ jnp.uint32(salt)
        x = (x ^ (x >> 16)) * jnp.uint32(0x7FEB352D)
        x = (x ^ (x >> 15)) * jnp.uint32(0x846CA68B)
        x = x ^ (x >> 16)
        return (x >> 8).astype(jnp.float32) / jnp.float32(1 << 24) * 0.1 - 0.05

    def step_body(state, counter, action):
        x, x_dot, theta, theta_dot, t = state
        force = jnp.where(action == 1, 10.0, -10.0)
        cos, sin = jnp.cos(theta), jnp.sin(theta)
        temp = (force + 0.05 * theta_dot**2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos**2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * x_acc
        theta, theta_dot = theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc
        t = t + 1
        terminated = (jnp.abs(x) > 2.4) | (jnp.abs(theta) > 0.2095)
        truncated = t >= 500
        done = terminated | truncated
        obs = jnp.stack([x, x_dot, theta, theta_dot], axis=1)
        lane = jnp.arange(N, dtype=jnp.uint32)
        fresh = [hash_uniform(counter, lane, s) for s in range(4)]
        new = [
            jnp.where(done, f, v) for f, v in zip(fresh, (x, x_dot, theta, theta_dot), strict=True)
        ]
        state = (*new, jnp.where(done, 0, t))
        reward = jnp.ones(N, jnp.float32)
        host = jnp.concatenate(
            [obs.ravel(), reward, terminated.astype(jnp.float32), truncated.astype(jnp.float32)]
        )
        return state, host

    def step(state, counter, action):
        if variant == "plain":
            return step_body(state, counter, action)
        if variant == "scan1":

            def body(s, _):
                s, host = step_body(s, counter, action)
                return s, host

            state, host = jax.lax.scan(body, state, None, length=1)
            return state, host[0]
        if variant == "while":  # trip count known at run time only: one While thunk
            host0 = jnp.zeros(7 * N, jnp.float32)

            def body(c):
                i, s, _ = c
                s, host = step_body(s, counter, action)
                return i + 1, s, host

            _, state, host = jax.lax.while_loop(
                lambda c: c[0] < (counter > 0).astype(jnp.int32), body, (jnp.int32(0), state, host0)
            )
            return state, host
        raise ValueError(f"variant must be plain, scan1 or while, got {variant!r}")

    fn = jax.jit(step, donate_argnums=0)
    zeros = jnp.zeros(N, jnp.float32)
    state = (zeros, zeros + 0, zeros + 0, zeros + 0, jnp.zeros(N, jnp.int32))
    rng = np.random.default_rng(0)
    actions = [rng.integers(0, 2, N).astype(np.int32) for _ in range(64)]
    counter = np.uint32(1)
    for i in range(100):  # warm up: compile, first calls
        state, host = fn(state, np.uint32(i + 1), actions[i % 64])
        np.asarray(host)
    per_step = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for i in range(STEPS):
            counter = np.uint32(counter + 1)
            state, host = fn(state, counter, actions[i % 64])
            out = np.asarray(host)
        per_step.append((time.perf_counter() - t0) / STEPS * 1e6)
    assert out.shape == (7 * N,)
    threads = {}
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/comm") as f:
            name = f.read().strip()
        threads[name] = threads.get(name, 0) + 1
    per_step.sort()
    return {"us_per_step": per_step[len(per_step) // 2], "threads": threads}


CONFIGS = {
    "as started": ("plain", {}),
    "pinned to one core": ("plain", {"REPRO_PIN": "1"}),
    "NPROC=1": ("plain", {"NPROC": "1"}),
    "async dispatch on": ("plain", {"REPRO_ASYNC": "1"}),
    "scan of length 1": ("scan1", {}),
    "while_loop, 1 trip": ("while", {}),
}


def main(rounds: int = 2) -> None:
    print(
        f"jax {__import__('jax').__version__}; {os.cpu_count()} CPUs; N={N}; load "
        f"{os.getloadavg()[0]:.1f}"
    )
    for _ in range(rounds):
        for name, (variant, extra) in CONFIGS.items():
            env = dict(os.environ, **extra)
            out = subprocess.run(
                [sys.executable, __file__, "child", variant],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            r = json.loads(out.strip().splitlines()[-1])
            eigen = r["threads"].get("tf_XLAEigen", 0)
            print(
                f"{name:22s} {r['us_per_step']:7.1f} us/step   tf_XLAEigen threads: {eigen}"
                f"   load {os.getloadavg()[0]:.1f}",
                flush=True,
            )


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        print(json.dumps(child(sys.argv[2])))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
