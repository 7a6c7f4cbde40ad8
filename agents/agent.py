"""What every agent shares: input checks, the jitted run loop with its progress reports,
evaluation. An algorithm (`PPO`, `DQN`, `SAC`) subclasses `Agent` and writes `init`, `update`
and `policy`; its config has `steps_per_update`, `num_updates`, `log_every`, `eval_envs` and
`rollout_backend`. With a `mesh`, every rollout splits its environments over the mesh's
`jaxsim.ENV_AXIS` axis (data parallelism; see `Agent`). Training rollouts run on `env_params`
and `params_sampler` (domain randomisation), evaluation on its own (`eval_params`,
`eval_params_sampler`; default: the environment's default params).
"""

from __future__ import annotations

import concurrent.futures
import functools
from collections.abc import Callable
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

import jaxsim
from agents import callbacks
from agents.structs import Metrics
from jaxsim.params import as_arrays
from jaxsim.params_sampling import check_sampler

# XLA:CPU's LLVM at -O1 without its expensive passes: a training loop is many small kernels,
# each an LLVM module, and these compile ~25% faster (process CPU time, CartPole PPO) while
# running as fast. Other backends keep their defaults.
CPU_COMPILER_OPTIONS = {
    "xla_backend_optimization_level": 1,
    "xla_llvm_disable_expensive_passes": True,
}

# Per program, what its compile may trade (process CPU seconds, jax 0.10.2, 2-core VM). XLA's
# older elemental emitters compile ~40% faster, but an elementwise fusion that XLA runs in place
# (its output in its input's buffer) fails LLVM's runtime alias check and runs its scalar loop: a
# tanh layer ~8x slower. So "run" keeps the default emitters (CartPole PPO loop: 1.9 s instead of
# 3.1-3.5 to compile, but 1.85x slower), and so does "evaluate" (0.7-0.8 s instead of 0.9, but a
# call 3.1x slower for CartPole PPO, 4x for Pendulum PPO, 1.15x for DQN, same returns). "init" runs
# once: -O0 as well (0.3 s instead of 1.3). agents/README.md ("Results") has the measurements.
_QUICK_EMITTERS = {"xla_cpu_use_fusion_emitters": False}
CPU_PROGRAM_OPTIONS = {
    "run": {},
    "evaluate": {},
    "init": {**_QUICK_EMITTERS, "xla_backend_optimization_level": 0},
}


def compiler_options(program: str = "run", env=None) -> dict | None:
    """The options an agent's jitted `program` ("run", "evaluate", "init") compiles with on this
    backend (None: XLA's), with those `env` asks for (`Env.cpu_compiler_options`: the brax and
    Playground adapters turn off YNNPACK fusions, ~13x slower in brax's step; a CartPole PPO
    update runs ~8% faster with them, so they stay on elsewhere). Options this jaxlib does not
    know are left out."""
    if jax.default_backend() != "cpu":
        return None
    wanted = {**CPU_PROGRAM_OPTIONS[program], **getattr(env, "cpu_compiler_options", {})}
    extra = {k: v for k, v in wanted.items() if k in CPU_COMPILER_OPTIONS or _known_option(k, v)}
    return {**CPU_COMPILER_OPTIONS, **extra}


@functools.cache
def _known_option(name: str, value) -> bool:
    # An unknown option fails the compile ("No such compile option"): probe once, on a scalar.
    try:
        jax.jit(lambda x: x + 1).lower(np.float32(0)).compile(compiler_options={name: value})
    except Exception:  # jaxlib raises its own error types here
        return False
    return True


class Agent:
    """One algorithm on one jaxsim environment: `init(key)`, `update(runner)`, `run`, `evaluate`.

    Every method is a pure function of its arguments (jit and vmap them freely). The runner
    (whatever `init` returns) carries everything a run needs, the PRNG key and an int32
    `update` count included, so `run(run(s, k), n - k)` equals `run(s, n)` bit for bit.
    `progress`, if given, is called on the host with a `Metrics` of numpy scalars every
    `config.log_every` updates of `run` and at its end, once per seed under vmap (from a single
    device-to-host call carrying every seed's metrics).

    `mesh`: a `jax.sharding.Mesh` with a `jaxsim.ENV_AXIS` axis, or None. Training rollouts
    (`rollout(self)`) and the initial environment state are split over it; everything else
    (networks, optimiser, minibatches drawn from the whole batch, a replay buffer) is left to
    XLA's partitioner, which moves what it must. `config.num_envs` must be a multiple of the
    axis size. A run on a mesh follows the single-device run up to float rounding (reductions
    over a split batch add in another order).

    Params, as `jaxsim.rollout` takes them (checked here, each error naming the argument):
    `env_params` and `params_sampler` are the training rollouts' `params=` (default
    `env.default_params`; each leaf its field's declared shape, shared, or with a leading
    `config.num_envs` axis, one value per environment) and `params_sampler=` (e.g.
    `jaxsim.uniform_params(env, masspole=(0.05, 0.5))`: fields drawn afresh every episode).
    `eval_params` and `eval_params_sampler` are the same for `evaluate` (per-environment
    leaves: a leading `config.eval_envs` axis); by default evaluation runs on
    `env.default_params`, whatever training ran on. Spaces come from `env.default_params`, as
    in `jaxsim.rollout`.
    """

    name: ClassVar[str]  # "ppo": the command's algorithm and the checkpoint's
    config_type: ClassVar[type]

    def __init__(
        self,
        config,
        env: jaxsim.Env,
        env_params=None,
        progress: Callable[[Metrics], None] | None = None,
        mesh=None,
        *,
        params_sampler=None,
        eval_params=None,
        eval_params_sampler=None,
    ):
        cls = type(self).__name__
        if not isinstance(config, self.config_type):
            raise TypeError(
                f"{cls}: config must be a {self.config_type.__name__}, got {type(config).__name__}"
            )
        if not isinstance(env, jaxsim.Env):
            raise TypeError(f"{cls}: env must be a jaxsim.Env (see jaxsim.make), got {env!r}")
        self.config = config
        self.env = env
        self.env_params = self._check_params("env_params", env_params, config.num_envs)
        self.eval_params = self._check_params("eval_params", eval_params, config.eval_envs)
        check_sampler(f"{cls} params_sampler", env, params_sampler, config.num_envs)
        check_sampler(f"{cls} eval_params_sampler", env, eval_params_sampler, config.eval_envs)
        self.params_sampler = params_sampler
        self.eval_params_sampler = eval_params_sampler
        self.eval_steps = self._eval_steps()
        self.obs_shape = env.observation_space(env.default_params).shape
        self.action_space = env.action_space(env.default_params)
        self.progress = progress
        self.mesh = None
        if mesh is not None:
            self.mesh = jaxsim.sharding.check_mesh(mesh, config.num_envs, owner=f"{cls} num_envs")
        self._jitted: dict = {}  # (chunk, vmapped), "init" or "evaluate" -> jitted function
        self.setup()
        # An unknown backend, or the fused one for an environment the kernel cannot run, fails
        # here, before anything compiles; checked without tracing a step (brax's traces in ~1 s).
        jaxsim.check_rollout(env, None, 1, backend=config.rollout_backend)

    def _check_params(self, argument: str, params, num_envs: int):
        """`params` (None: the env's default) as arrays, its leaves checked against their
        declarations for a batch of `num_envs` (`Env.params_axes`: errors name the field)."""
        env, owner = self.env, f"{type(self).__name__} {argument}"
        if params is None:
            return env.default_params
        if not isinstance(params, env.params_type):
            raise TypeError(
                f"{owner}: must be {env.params_type.__name__} for {env.id} "
                f"(env.default_params), got {type(params).__name__}"
            )
        params = as_arrays(params)
        env.params_axes(params, num_envs, owner=owner)
        return params

    def _eval_steps(self) -> int:
        """Steps of an evaluation rollout: the longest time limit an evaluation episode can
        have, so every environment finishes its first episode."""
        limit = int(np.max(np.asarray(self.eval_params.max_episode_steps)))
        sampler = self.eval_params_sampler
        if sampler is None or "max_episode_steps" not in sampler.fields:
            return limit
        if not isinstance(sampler, jaxsim.UniformParams):
            raise ValueError(
                f"{type(self).__name__} eval_params_sampler: draws max_episode_steps, and "
                "evaluation must know the longest episode; draw it with jaxsim.uniform_params, "
                "whose bound is known, or give it per environment in eval_params"
            )
        return int(np.max(np.asarray(sampler.high["max_episode_steps"])))

    # ------------------------------------------------------------------ what an algorithm writes
    def setup(self) -> None:
        """Builds networks and optimisers from `self.config`; a ValueError if the env's spaces
        do not suit the algorithm. Called by `__init__` before the rollout backend is checked."""

    def init(self, key: jax.Array) -> Any:
        raise NotImplementedError

    def update(self, runner) -> tuple[Any, Metrics]:
        raise NotImplementedError

    def policy(self, runner, deterministic: bool = False):
        """The runner's acting policy, a `jaxsim.rollout` policy over raw observations."""
        raise NotImplementedError

    def rollout(self, policy, key: jax.Array, state) -> jaxsim.Trajectory:
        """A training rollout: `config.num_steps` steps of `config.num_envs` from `state`, on
        `self.mesh` if any."""
        c = self.config
        return jaxsim.rollout(
            self.env,
            policy,
            c.num_steps,
            num_envs=c.num_envs,
            key=key,
            params=self.env_params,
            state=state,
            backend=c.rollout_backend,
            params_sampler=self.params_sampler,
            mesh=self.mesh,
        )

    def initial_state(self, key: jax.Array) -> jaxsim.RolloutState:
        """`config.num_envs` environments reset from `key`, on `self.mesh` if any."""
        return jaxsim.initial_state(
            self.env,
            key,
            self.config.num_envs,
            self.env_params,
            params_sampler=self.params_sampler,
            mesh=self.mesh,
        )

    # -------------------------------------------------------------------------------------- run
    def run(self, runner, num_updates: int) -> tuple[Any, Metrics]:
        """`num_updates` updates from `runner` -> (runner, Metrics with leading [num_updates])."""
        every = self.config.log_every

        def body(runner, i):
            runner, metrics = self.update(runner)
            if self.progress is not None:
                # The predicate depends on the scan index only, never on a (vmapped) state
                # leaf, so under vmap it stays a real branch and skipped updates cost nothing.
                report = ((i + 1) % every == 0) | (i == num_updates - 1)
                callbacks.report_when(report, self._report, metrics)
            return runner, metrics

        return jax.lax.scan(body, runner, jnp.arange(num_updates, dtype=jnp.int32))

    def _report(self, metrics: Metrics) -> None:
        # Counts travel as float32 (exact below 2**24); steps are rebuilt from the update.
        update = int(metrics.update)
        steps = np.int64(update) * self.config.steps_per_update
        self.progress(metrics.replace(update=np.int32(update), steps=steps))

    def jit_run(self, num_updates: int, vmapped: bool = True) -> Callable:
        """`run` jitted for a fixed chunk size (over a leading seed axis if vmapped), cached."""
        key = (int(num_updates), bool(vmapped))
        if key not in self._jitted:
            fn = functools.partial(self.run, num_updates=key[0])
            fn = jax.vmap(fn) if vmapped else fn
            self._jitted[key] = jax.jit(fn, compiler_options=compiler_options(env=self.env))
        return self._jitted[key]

    def jit_init(self) -> Callable:
        """`init` jitted over a leading seed axis: keys[S] -> runner[S], cached."""
        if "init" not in self._jitted:
            fn = jax.vmap(self.init)
            self._jitted["init"] = jax.jit(fn, compiler_options=compiler_options("init", self.env))
        return self._jitted["init"]

    def jit_evaluate(self) -> Callable:
        """`evaluate` jitted over a leading seed axis: (runner[S], keys[S]) -> float32[S,
        eval_envs]; one compiled function for the stop checks and the final evaluation."""
        if "evaluate" not in self._jitted:
            fn = jax.vmap(self.evaluate)
            self._jitted["evaluate"] = jax.jit(
                fn, compiler_options=compiler_options("evaluate", self.env)
            )
        return self._jitted["evaluate"]

    def precompile(
        self,
        num_seeds: int,
        chunks: tuple[int, ...] = (),
        evaluate: bool = False,
        run_seeds: int | None = None,
    ):
        """Compiles, at once on a thread pool, what a run of `num_seeds` seeds will call:
        `jit_init`, `jit_run(n)` for each n in `chunks`, and `jit_evaluate` if asked. XLA
        compiles without the GIL, so the programs' compiles overlap (a cold start waits for the
        longest, not the sum); the jitted functions then reuse what was compiled.

        Tracing holds the GIL, so programs are traced one by one, the run loop (the longest
        compile) first, and each compile starts as soon as its program is traced: the other
        programs' tracing overlaps the loop's compile instead of delaying it. `run_seeds`: the
        seeds each `jit_run` call takes if not `num_seeds` (1: `run_chunks(one_seed_at_a_time=
        True)`)."""
        keys = jax.ShapeDtypeStruct((num_seeds,), jax.random.key(0).dtype)
        init = self.jit_init()
        runner = jax.eval_shape(init, keys)
        if run_seeds is not None:
            run_keys = jax.ShapeDtypeStruct((run_seeds,), keys.dtype)
            runner_in = jax.eval_shape(init, run_keys)
        else:
            runner_in = runner
        jobs = [(self.jit_run(n), (runner_in,)) for n in dict.fromkeys(chunks)]
        jobs.append((init, (keys,)))
        if evaluate:
            jobs.append((self.jit_evaluate(), (runner, keys)))
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
            futures = [pool.submit(fn.lower(*args).compile) for fn, args in jobs]
            for future in futures:
                future.result()

    def metrics(self, update: jax.Array, last_return: jax.Array, episodes, loss) -> Metrics:
        """The Metrics of the update that leaves the runner at `update` updates done."""
        return Metrics(
            update=update,
            steps=update * self.config.steps_per_update,
            mean_return=last_return,
            episodes=episodes,
            loss=loss,
        )

    # ------------------------------------------------------------------------------- evaluation
    def evaluate(self, runner, key: jax.Array) -> jax.Array:
        """Returns of `config.eval_envs` episodes of the deterministic policy -> float32[eval_envs].

        Every environment starts at step 0 and runs `eval_steps` steps (the longest time limit),
        so each finishes at least one episode; its first one counts.
        """
        traj = self.evaluation_rollout(
            self.policy(runner, deterministic=True),
            key,
            # Only what the returns need: a long time limit (MinAtar's 10k) would otherwise
            # keep [n, eval_envs, *obs] observations.
            outputs=("terminated", "truncated", "episode_return"),
        )
        first = jnp.argmax(traj.done, axis=0)
        return traj.episode_return[first, jnp.arange(self.config.eval_envs)]

    def evaluation_rollout(self, policy, key: jax.Array, outputs="all") -> jaxsim.Trajectory:
        """`config.eval_envs` environments from a fresh start for `eval_steps` steps under
        `policy`, on `eval_params` and `eval_params_sampler` (what `evaluate` and
        `agents.play.film_episode` run)."""
        c = self.config
        return jaxsim.rollout(
            self.env,
            policy,
            self.eval_steps,
            num_envs=c.eval_envs,
            key=key,
            params=self.eval_params,
            params_sampler=self.eval_params_sampler,
            backend=c.rollout_backend,
            outputs=outputs,
        )


def latest_return(traj: jaxsim.Trajectory, last_return: jax.Array):
    """(mean return of the episodes `traj` finished, else `last_return`; how many finished)."""
    episodes = traj.episode_stats()
    return jnp.where(episodes.count > 0, episodes.mean_return, last_return), episodes.count
