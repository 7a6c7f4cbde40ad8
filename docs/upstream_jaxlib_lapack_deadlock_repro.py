"""Minimal reproduction: two batched LAPACK calls running at once on XLA:CPU's two-thread pool
deadlock (jax and numpy only, no jaxsim).

One jitted program holds two independent batches of Cholesky factorisations and triangular
solves (4096 matrices of 24 x 24 each). The thunk executor runs the two chains on the two
intra-op threads at once; each LAPACK kernel splits its batch with `ParallelBatchMap` on that
same pool and waits for the pieces, which neither thread is free to run. On a 2-core machine
(XLA sizes its pool from the CPUs it may use) the loop stops within about a hundred calls, the
process at 0% CPU. A watchdog prints the main thread's stack and exits with status 1 after
`SECONDS` (default 120).

  python docs/upstream_jaxlib_lapack_deadlock_repro.py [SECONDS]
  NPROC=4 python docs/upstream_jaxlib_lapack_deadlock_repro.py    # a pool of four threads
"""

import faulthandler
import sys
import time

import jax
import jax.numpy as jnp

CALLS, BATCH, SIZE = 2000, 4096, 24


def main() -> None:
    faulthandler.dump_traceback_later(float(sys.argv[1]) if len(sys.argv) > 1 else 120, exit=True)
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    m1 = jax.random.normal(k1, (BATCH, SIZE, SIZE))
    m2 = jax.random.normal(k2, (BATCH, SIZE, SIZE))
    a = m1 @ jnp.swapaxes(m1, -1, -2) + SIZE * jnp.eye(SIZE)  # symmetric positive definite
    b = m2 @ jnp.swapaxes(m2, -1, -2) + SIZE * jnp.eye(SIZE)
    x = jax.random.normal(k3, (BATCH, SIZE, 1))

    @jax.jit
    def two_chains(a, b, x):
        ya = jax.scipy.linalg.solve_triangular(jnp.linalg.cholesky(a), x, lower=True)
        yb = jax.scipy.linalg.solve_triangular(jnp.linalg.cholesky(b), x, lower=True)
        return ya + yb

    start = time.perf_counter()
    for call in range(CALLS):
        x = jax.block_until_ready(two_chains(a, b, x) * 1e-3 + x)
        if call % 50 == 0:
            print(f"call {call}: {time.perf_counter() - start:.1f} s", flush=True)
    print(f"{CALLS} calls, no hang: jax {jax.__version__}, devices {jax.devices()}")


if __name__ == "__main__":
    main()
