"""Actor threads: step a host pool, run the jitted policy, cut per-env lanes into segments."""

from __future__ import annotations

import collections
import dataclasses
import queue
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from agents.agent import compiler_options
from agents.decoupled.host_envs import HostPool, StepRows
from agents.networks import to_policy


class Stopped(Exception):
    """The run is stopping (an error elsewhere, Ctrl-C, the end): a waiting thread gives up."""


class PhaseTimer:
    """Wall seconds per named phase of one thread (acting, waiting, learning...), and the
    whole process's CPU seconds over the same span (every thread's: XLA's pool, EnvPool's)."""

    def __init__(self, name: str):
        self.name = name
        self.restart()

    def restart(self) -> None:
        """Forget what was timed so far (compilation, start-up): the profile starts now."""
        self.seconds: dict[str, float] = collections.defaultdict(float)
        self.t0 = time.perf_counter()
        self.cpu0 = time.process_time()

    def add(self, phase: str, since: float) -> float:
        now = time.perf_counter()
        self.seconds[phase] += now - since
        return now

    def report(self) -> dict[str, Any]:
        wall = time.perf_counter() - self.t0
        cpu = time.process_time() - self.cpu0
        return {
            "thread": self.name,
            "wall_s": wall,
            "process_cpu_s": cpu,
            "phases_s": dict(self.seconds),
        }


@struct.dataclass
class Segment:
    """num_steps transitions of a block of environments, time-major [T, B, ...]: the fields
    `PPOLearner.learn` reads (the form of a `jaxsim.Trajectory`)."""

    obs: Any
    action: Any
    reward: Any
    terminated: Any
    truncated: Any
    next_obs: Any
    extras: Any  # {"log_prob": [T, B], "value": [T, B]} of the acting policy


@dataclasses.dataclass
class SegmentMsg:
    """What an actor hands the learner."""

    actor: int
    index: int  # the actor's segment count (the update it feeds under a lock-step schedule)
    version: int  # the parameter version the segment was (first) acted with
    segment: Segment
    episode_returns: np.ndarray  # returns of the episodes that finished while acting it


@struct.dataclass
class ActingParams:
    """What the learner publishes to the actors: the policy's weights and normaliser."""

    params: Any
    obs_stats: Any  # None without observation normalisation


def make_act(key: jax.Array) -> Callable:
    """act(acting, actor, segment, step, obs[B, ...]) -> (action, log_prob, value), jitted.

    The sampling key is `key` folded with (actor, segment, step), so a run's actions depend
    on its seed and the schedule only, never on thread timing."""

    def act(acting: ActingParams, actor, segment, step, obs):
        k = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(key, actor), segment), step)
        action, extras = to_policy(acting.params, acting.obs_stats)(k, obs)
        return action, extras["log_prob"], extras["value"]

    return jax.jit(act, compiler_options=compiler_options())


class Lanes:
    """Per-environment transition buffers; a segment is cut once every lane holds T.

    Lanes fill at their own pace (an asynchronous pool, a skipped reset row); what a lane holds
    beyond T carries over to the next segment, so no transition is lost or reordered."""

    def __init__(self, num_envs: int, num_steps: int, obs_shape, action_shape, action_dtype):
        self.T, self.B = num_steps, num_envs
        cap = 2 * num_steps
        f32 = np.float32
        self.data = {
            "obs": np.zeros((cap, num_envs, *obs_shape), f32),
            "action": np.zeros((cap, num_envs, *action_shape), action_dtype),
            "reward": np.zeros((cap, num_envs), f32),
            "terminated": np.zeros((cap, num_envs), bool),
            "truncated": np.zeros((cap, num_envs), bool),
            "next_obs": np.zeros((cap, num_envs, *obs_shape), f32),
            "log_prob": np.zeros((cap, num_envs), f32),
            "value": np.zeros((cap, num_envs), f32),
        }
        self.pos = np.zeros(num_envs, np.int64)

    def add(self, ids: np.ndarray, **fields) -> None:
        cap = self.data["obs"].shape[0]
        if len(ids) and self.pos[ids].max() >= cap:  # a lane far ahead of the slowest: grow
            for k, v in self.data.items():
                self.data[k] = np.concatenate([v, np.zeros_like(v)])
        for k, v in fields.items():
            self.data[k][self.pos[ids], ids] = v
        self.pos[ids] += 1

    def ready(self) -> bool:
        return bool(self.pos.min() >= self.T)

    def pop(self) -> Segment:
        T, d = self.T, self.data
        out = {k: v[:T].copy() for k, v in d.items()}
        for v in d.values():
            v[:-T] = v[T:].copy()
        self.pos -= T
        extras = {"log_prob": out.pop("log_prob"), "value": out.pop("value")}
        return Segment(**out, extras=extras)


class Actor(threading.Thread):
    """One actor: its own pool, acting with the parameters `get_params(segment)` hands it and
    putting each segment on `out` (bounded). An exception stops the run: it is kept, with its
    traceback, in `error`, and `stop` is set so every other thread gives up."""

    def __init__(
        self,
        index: int,
        make_pool: Callable[[], HostPool],
        act: Callable,
        get_params: Callable[[int], tuple[int, ActingParams]],
        out: queue.Queue,
        stop: threading.Event,
        num_steps: int,
        first_segment: int = 0,
    ):
        super().__init__(name=f"actor-{index}", daemon=True)
        self.index, self.make_pool, self.act = index, make_pool, act
        self.get_params, self.out, self.stop = get_params, out, stop
        self.num_steps, self.segment = num_steps, first_segment
        self.timer = PhaseTimer(self.name)
        self.error: str | None = None
        self.env_steps = 0

    def run(self) -> None:
        pool = None
        try:
            t = time.perf_counter()
            pool = self.make_pool()
            rows = pool.reset()
            t = self.timer.add("env", t)
            self._loop(pool, rows, t)
        except Stopped:
            pass
        except BaseException:
            self.error = traceback.format_exc()
            self.stop.set()
        finally:
            if pool is not None:
                pool.close()

    def _loop(self, pool: HostPool, rows: StepRows, t: float) -> None:
        space = pool.action_space
        shape = tuple(getattr(space, "shape", ()))
        dtype = np.int32 if not shape and hasattr(space, "n") else np.float32
        lanes = Lanes(pool.num_envs, self.num_steps, pool.observation_space.shape, shape, dtype)
        B = pool.num_envs
        last = {
            "obs": np.zeros((B, *pool.observation_space.shape), np.float32),
            "action": np.zeros((B, *shape), dtype),
            "log_prob": np.zeros(B, np.float32),
            "value": np.zeros(B, np.float32),
        }
        running_return = np.zeros(B, np.float64)
        while not self.stop.is_set():
            version, acting = self.get_params(self.segment)
            t = self.timer.add("wait_params", t)
            finished: list[float] = []
            step = 0
            while not lanes.ready():
                if self.stop.is_set():
                    raise Stopped
                ids = rows.env_ids
                last["obs"][ids] = rows.obs
                out = self.act(acting, self.index, self.segment, step, rows.obs)
                action, log_prob, value = (np.asarray(x) for x in out)
                t = self.timer.add("policy", t)
                last["action"][ids], last["log_prob"][ids], last["value"][ids] = (
                    action,
                    log_prob,
                    value,
                )
                pool.send(action.astype(dtype, copy=False), ids)
                new = pool.recv()
                t = self.timer.add("env", t)
                rows = self._record(lanes, last, new, running_return, finished)
                t = self.timer.add("record", t)
                step += 1
            segment = lanes.pop()
            msg = SegmentMsg(
                self.index, self.segment, version, segment, np.asarray(finished, np.float32)
            )
            self.env_steps += self.num_steps * B
            self.segment += 1
            while True:
                try:
                    self.out.put(msg, timeout=0.05)
                    break
                except queue.Full:
                    if self.stop.is_set():
                        raise Stopped from None
            t = self.timer.add("wait_queue", t)

    def _record(self, lanes, last, rows: StepRows, running_return, finished) -> StepRows:
        keep = rows.transition
        ids = rows.env_ids[keep]
        if len(ids):
            done = rows.terminated[keep] | rows.truncated[keep]
            lanes.add(
                ids,
                obs=last["obs"][ids],
                action=last["action"][ids],
                log_prob=last["log_prob"][ids],
                value=last["value"][ids],
                reward=rows.reward[keep],
                terminated=rows.terminated[keep],
                truncated=rows.truncated[keep],
                next_obs=rows.final_obs[keep],
            )
            running_return[ids] += rows.reward[keep]
            finished.extend(running_return[ids[done]].tolist())
            running_return[ids[done]] = 0.0
        return rows


def stack_segments(msgs: list[SegmentMsg]) -> Segment:
    """The actors' segments side by side on the environment axis: [T, sum of B, ...]."""
    return jax.tree.map(lambda *xs: np.concatenate(xs, axis=1), *(m.segment for m in msgs))


def as_device(segment: Segment) -> Segment:
    """The segment's arrays on the default device, one transfer each."""
    return jax.tree.map(jnp.asarray, segment)
