"""Host simulators (EnvPool, Gymnasium vector envs, the original MinAtar) behind one pool API."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import warnings

import numpy as np

import jaxsim
from agents.config import check_value

EXTRA_INSTALL = "pip install 'jaxsim-rl[decoupled]'"
"""The install command every missing-dependency error names (the `decoupled` extra)."""

PREFIXES = ("gymnasium/", "envpool/")
"""Environment ids the decoupled mode runs: `gymnasium/<Gymnasium id>`, `envpool/<EnvPool
task id>`; the original MinAtar package runs through its Gymnasium ids
(`gymnasium/MinAtar/Breakout-v0`: a bare `MinAtar/Breakout-v0` is jaxsim's native game)."""


class MissingDependency(ImportError):
    """A host simulator (or its data, such as Atari ROMs) is not installed: names the extra."""


def is_host_id(env_id: str) -> bool:
    """Whether `env_id` names a host simulator (one of PREFIXES) rather than a jaxsim env."""
    return isinstance(env_id, str) and env_id.startswith(PREFIXES)


def env_argument(argv: list[str]) -> str | None:
    """The value of `--env` in a command line, if given (how `agents.train` picks this mode)."""
    for i, arg in enumerate(argv):
        if arg == "--env" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--env="):
            return arg.removeprefix("--env=")
    return None


@dataclasses.dataclass
class StepRows:
    """What one `recv` returns: rows of some environments of the pool ([R] leading axis).

    Rows are same-step auto-reset transitions: where `terminated | truncated`, `final_obs` is the
    episode's last observation and `obs` the next episode's first (as jaxsim's rollouts).
    `transition` is False for a row that carries no transition (a pool's first observation).
    """

    env_ids: np.ndarray  # int32[R]
    obs: np.ndarray  # [R, *obs_shape]: what the next action is chosen from
    reward: np.ndarray  # float32[R]
    terminated: np.ndarray  # bool[R]
    truncated: np.ndarray  # bool[R]
    final_obs: np.ndarray  # [R, *obs_shape]: the true next observation of the transition
    transition: np.ndarray  # bool[R]


def _import(module: str, what: str):
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependency(
            f"{what} needs the Python package {module!r}, which is not installed ({e}); install "
            f"the decoupled extra: {EXTRA_INSTALL}"
        ) from None


def _jaxsim_space(space, what: str):
    import gymnasium

    if isinstance(space, gymnasium.spaces.Discrete):
        if int(space.start) != 0:
            raise ValueError(f"{what}: Discrete action spaces must start at 0, got {space}")
        return jaxsim.Discrete(int(space.n))
    if isinstance(space, gymnasium.spaces.Box):
        low = np.broadcast_to(np.asarray(space.low, np.float32), space.shape)
        high = np.broadcast_to(np.asarray(space.high, np.float32), space.shape)
        if space.dtype == np.bool_:
            low, high = np.zeros(space.shape, np.float32), np.ones(space.shape, np.float32)
        return jaxsim.Box(low, high, tuple(space.shape))
    raise ValueError(f"{what}: space {space} is neither Discrete nor Box")


class HostPool:
    """`num_envs` environments of one host simulator: `reset()`, `send(actions, env_ids)`,
    `recv() -> StepRows`, `close()`. Observations come back as float32.

    Synchronous pools return every environment from each `recv`; an asynchronous EnvPool
    (`batch_size < num_envs`) returns the first `batch_size` to finish, in no fixed order.
    """

    env_id: str
    num_envs: int
    asynchronous: bool = False
    observation_space: jaxsim.Box
    action_space: jaxsim.Discrete | jaxsim.Box
    max_episode_steps: int | None

    def reset(self) -> StepRows:
        raise NotImplementedError

    def send(self, actions: np.ndarray, env_ids: np.ndarray) -> None:
        raise NotImplementedError

    def recv(self) -> StepRows:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def _rows(self, ids, obs, reward, term, trunc, final_obs, transition=True) -> StepRows:
        obs = np.asarray(obs, np.float32)
        n = len(ids)
        if not self.asynchronous and n > 1 and np.any(np.diff(ids) < 0):
            # Synchronous rows in env order: the policy draws each row's action by its position,
            # so a pool that returns them in completion order would make runs irreproducible.
            order = np.argsort(ids, kind="stable")
            ids, obs, final_obs = np.asarray(ids)[order], obs[order], np.asarray(final_obs)[order]
            reward, term, trunc = (np.asarray(x).reshape(n)[order] for x in (reward, term, trunc))
        return StepRows(
            env_ids=np.asarray(ids, np.int32),
            obs=obs,
            reward=np.asarray(reward, np.float32).reshape(n),
            terminated=np.asarray(term, bool).reshape(n),
            truncated=np.asarray(trunc, bool).reshape(n),
            final_obs=np.asarray(final_obs, np.float32),
            transition=np.full(n, transition, bool),
        )


def _make_gymnasium_env(name: str):
    # Module-level (picklable) and registering MinAtar itself: spawned workers import afresh.
    import gymnasium

    if name.startswith("MinAtar/") and name not in gymnasium.registry:
        importlib.import_module("minatar.gym").register_envs()
    return gymnasium.make(name)


class GymnasiumPool(HostPool):
    """A Gymnasium vector env in same-step auto-reset mode (`info["final_obs"]`), stepped in
    this thread (`SyncVectorEnv`) or in worker processes (`vectorization="async"`)."""

    def __init__(self, env_id: str, num_envs: int, seed: int, vectorization: str = "sync"):
        gym = _import("gymnasium", env_id)
        name = env_id.removeprefix("gymnasium/")
        if name.startswith("MinAtar/"):
            minatar_gym = _import("minatar.gym", env_id)
            if name not in gym.registry:
                minatar_gym.register_envs()
        if name not in gym.registry:
            raise ValueError(f"env: unknown Gymnasium id {name!r} (from {env_id!r})")
        check_value("GymnasiumPool", "vectorization", vectorization, str, choices=("sync", "async"))
        mode = gym.vector.AutoresetMode.SAME_STEP
        fns = [functools.partial(_make_gymnasium_env, name)] * num_envs
        if vectorization == "sync":
            self.env = gym.vector.SyncVectorEnv(fns, autoreset_mode=mode)
        else:  # spawned workers: forking a process that runs JAX's threads can deadlock
            self.env = gym.vector.AsyncVectorEnv(fns, autoreset_mode=mode, context="spawn")
        self.env_id, self.num_envs, self.seed = env_id, num_envs, seed
        self.observation_space = _jaxsim_space(self.env.single_observation_space, env_id)
        self.action_space = _jaxsim_space(self.env.single_action_space, env_id)
        self.max_episode_steps = gym.spec(name).max_episode_steps
        self._all = np.arange(num_envs, dtype=np.int32)

    def reset(self) -> StepRows:
        obs, _ = self.env.reset(seed=self.seed)
        zeros = np.zeros(self.num_envs)
        return self._rows(self._all, obs, zeros, zeros, zeros, obs, transition=False)

    def send(self, actions, env_ids) -> None:
        self._actions = actions  # a synchronous pool: every environment, in order

    def recv(self) -> StepRows:
        obs, reward, term, trunc, info = self.env.step(self._actions)
        final = obs
        if "_final_obs" in info and np.any(info["_final_obs"]):
            final = np.array(obs, copy=True)
            for i in np.flatnonzero(info["_final_obs"]):
                final[i] = info["final_obs"][i]
        return self._rows(self._all, obs, reward, term, trunc, final)

    def close(self) -> None:
        self.env.close()


class EnvPoolPool(HostPool):
    """EnvPool's C++ pool (the GIL is released while it steps). Synchronous when `batch_size`
    equals `num_envs`: finished environments are then reset at once (`reset(env_ids)`), which
    gives same-step auto-reset. Asynchronous otherwise: EnvPool resets a finished environment
    on its next step instead, and that row is marked `transition=False`."""

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        seed: int,
        batch_size: int | None = None,
        num_threads: int = 0,
    ):
        envpool = _import("envpool", env_id)
        task = env_id.removeprefix("envpool/")
        if task not in envpool.list_all_envs():
            raise ValueError(f"env: EnvPool has no task {task!r} (from {env_id!r})")
        batch_size = num_envs if batch_size is None else batch_size
        check_value("EnvPool", "batch_size", batch_size, ge=1, le=num_envs)
        try:
            self.env = envpool.make(
                task,
                env_type="gymnasium",
                num_envs=num_envs,
                batch_size=batch_size,
                seed=seed,
                num_threads=num_threads,
            )
        except Exception as e:  # a missing ROM or asset surfaces here, as EnvPool's own error
            raise MissingDependency(
                f"{env_id}: EnvPool could not create {task!r} ({type(e).__name__}: {e}); its "
                f"data (Atari ROMs, assets) may be missing: {EXTRA_INSTALL}"
            ) from e
        self.env_id, self.num_envs = env_id, num_envs
        self.asynchronous = batch_size < num_envs
        with warnings.catch_warnings():
            # EnvPool builds its float32 Boxes from float64 bounds, and Gymnasium warns about
            # the cast on every pool; the bounds are read as float32 below either way.
            warnings.filterwarnings("ignore", ".*Box (low|high)'s precision lowered", UserWarning)
            self.observation_space = _jaxsim_space(self.env.observation_space, env_id)
            self.action_space = _jaxsim_space(self.env.action_space, env_id)
        steps = self.env.spec.config.max_episode_steps
        self.max_episode_steps = int(steps) if steps and math.isfinite(steps) else None
        self._resetting = np.zeros(num_envs, bool)  # async: the next row of the env is a reset

    def reset(self) -> StepRows:
        if self.asynchronous:
            self.env.async_reset()
            return self.recv()
        obs, info = self.env.reset()
        ids, zeros = info["env_id"], np.zeros(self.num_envs)
        return self._rows(ids, obs, zeros, zeros, zeros, obs, transition=False)

    def send(self, actions, env_ids) -> None:
        self.env.send(np.asarray(actions), np.asarray(env_ids, np.int32))

    def recv(self) -> StepRows:
        obs, reward, term, trunc, info = self.env.recv()
        ids = np.asarray(info["env_id"], np.int32)
        if self.asynchronous:
            rows = self._rows(ids, obs, reward, term, trunc, obs)
            rows.transition = ~self._resetting[ids] & (info["elapsed_step"] > 0)
            self._resetting[ids] = rows.terminated | rows.truncated
            # A finished environment's row shows its last observation: it acts once more (the
            # action is ignored) and its next row is the reset one, without a transition.
            return rows
        done = np.flatnonzero(np.asarray(term) | np.asarray(trunc))
        final = np.asarray(obs, np.float32)
        obs = final
        if len(done):
            obs = np.array(final, copy=True)
            reset_obs, reset_info = self.env.reset(ids[done])
            row_of = np.empty(self.num_envs, np.int64)
            row_of[ids] = np.arange(len(ids))
            obs[row_of[np.asarray(reset_info["env_id"])]] = reset_obs
        return self._rows(ids, obs, reward, term, trunc, final)

    def close(self) -> None:
        self.env.close()


def make_pool(
    env_id: str,
    num_envs: int,
    seed: int,
    envpool_batch_size: int | None = None,
    vectorization: str = "sync",
    envpool_threads: int = 0,
) -> HostPool:
    """A pool of `num_envs` environments of the host id `env_id`, seeded from `seed`.

    Raises ValueError for an id outside PREFIXES or unknown to its simulator, and
    MissingDependency (naming the `decoupled` extra) when the simulator is not installed.
    `envpool_threads`: EnvPool's worker threads per pool (0: EnvPool's default, one per core).
    """
    if not is_host_id(env_id):
        raise ValueError(
            f"env: {env_id!r} is not a host environment id; they start with one of {PREFIXES}"
        )
    check_value("make_pool", "num_envs", num_envs, ge=1)
    if env_id.startswith("envpool/"):
        return EnvPoolPool(env_id, num_envs, seed, envpool_batch_size, envpool_threads)
    return GymnasiumPool(env_id, num_envs, seed, vectorization)
