"""The actor-learner loop: schedules, bounded queues, parameter publishing, failures and stops."""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from agents.config import ConfigMixin, check_declared, check_value, config_field
from agents.decoupled.actor import (
    ActingParams,
    Actor,
    PhaseTimer,
    SegmentMsg,
    Stopped,
    as_device,
    make_act,
    stack_segments,
)
from agents.decoupled.host_envs import HostPool, make_pool
from agents.decoupled.learner import HostPPO, LearnerState
from agents.ppo import PPOConfig
from agents.structs import LossInfo

SCHEDULES = {"sync": 0, "reproducible": 1, "free": None}
"""Schedule -> how many updates behind the learner the actors act (None: as fresh as they find).

sync: step, then learn (one segment at a time, nothing overlaps: the baseline).
reproducible: actors act with the parameters exactly one update behind (cleanba's schedule):
  acting segment k + 1 overlaps learning on segment k, and a run is a function of its seed and
  actor count alone. PPO's ratio is taken against the acting policy; advantages are GAE.
free: actors never wait for parameters; the learner takes segments as they come and corrects
  for their staleness with V-trace (IMPALA)."""


class ActorFailed(RuntimeError):
    """An actor raised; the message holds its traceback."""


@dataclasses.dataclass(frozen=True)
class DecoupledConfig(ConfigMixin):
    """How the actors and the learner are arranged (the PPO settings are a PPOConfig)."""

    env_id: str
    schedule: str = config_field(
        "reproducible", "How far behind the learner actors act.", choices=tuple(SCHEDULES)
    )
    actors: int = config_field(
        2, "Threads, each with its own pool of num_envs / actors environments.", ge=1
    )
    queue_size: int = config_field(
        1, "Segments an actor may have finished ahead of the learner.", ge=1
    )
    envpool_batch_size: int | None = config_field(
        None, "Per actor; below its envs EnvPool is asynchronous (free only).", optional=True, ge=1
    )
    vectorization: str = config_field(
        "sync",
        'Gymnasium pools: "sync" (in the thread) or "async" (processes).',
        choices=("sync", "async"),
    )
    envpool_threads: int = config_field(
        0, "EnvPool worker threads per actor's pool (0: one per core).", ge=0
    )
    seed: int = config_field(0, "Seeds the actors' pools.")

    def check(self, ppo: PPOConfig) -> None:
        """A ValueError naming the field for anything that cannot run, before any work."""
        check_declared(self)
        if ppo.num_envs % self.actors:
            raise ValueError(
                f"actors={self.actors} must divide num_envs={ppo.num_envs} (each actor steps "
                "num_envs / actors environments)"
            )
        if self.envpool_batch_size is not None:
            if not self.env_id.startswith("envpool/"):
                raise ValueError(f"envpool_batch_size is for envpool/ ids, not {self.env_id!r}")
            per_actor = ppo.num_envs // self.actors
            check_value(
                type(self).__name__,
                "envpool_batch_size",
                self.envpool_batch_size,
                ge=1,
                le=per_actor,
            )
            if self.envpool_batch_size < per_actor and self.schedule != "free":
                raise ValueError(
                    "an asynchronous EnvPool (envpool_batch_size < num_envs / actors) returns "
                    "environments in timing order, so only the free schedule can use it, not "
                    f"{self.schedule!r}"
                )

    def pool_seed(self, start_update: int, actor: int) -> int:
        """The seed of an actor's pool; a resumed run (start_update > 0) gets fresh ones."""
        words = np.random.SeedSequence([self.seed, start_update, actor]).generate_state(1)
        return int(words[0] % (2**31 - 2**20))


class ParamStore:
    """Published parameter versions; actors wait here for the version their schedule needs."""

    def __init__(self, stop: threading.Event):
        self.cond = threading.Condition()
        self.versions: dict[int, ActingParams] = {}
        self.latest_version = -1
        self.stop = stop

    def publish(self, version: int, acting: ActingParams) -> None:
        with self.cond:
            self.versions[version] = acting
            self.latest_version = version
            for old in [v for v in self.versions if v < version - 2]:
                del self.versions[old]
            self.cond.notify_all()

    def wait(self, version: int) -> ActingParams:
        with self.cond:
            while version not in self.versions:
                if self.stop.is_set():
                    raise Stopped
                self.cond.wait(timeout=0.05)
            return self.versions[version]

    def latest(self) -> tuple[int, ActingParams]:
        with self.cond:
            return self.latest_version, self.versions[self.latest_version]


@dataclasses.dataclass
class UpdateReport:
    """What the learner knows after an update (host values)."""

    update: int  # updates done
    env_steps: int  # env steps learned from, all actors together
    loss: LossInfo  # numpy scalars
    episode_returns: np.ndarray  # of the episodes finished in this update's segments
    staleness: float  # mean updates between the acting parameters and the learner's


@dataclasses.dataclass
class RunResult:
    state: LearnerState  # after the last completed update: what a checkpoint saves
    interrupted: str | None  # "SIGINT" / "SIGTERM" if a signal stopped the run, else None
    profile: list[dict[str, Any]]  # per thread: wall seconds and seconds per phase
    update_times: list[float]  # perf_counter after each update (for throughput)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so the learner stops as on Ctrl-C."""


@contextlib.contextmanager
def _sigterm_as_interrupt():
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Terminated

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_decoupled(
    learner: HostPPO,
    dc: DecoupledConfig,
    state: LearnerState,
    num_updates: int,
    on_update: Callable[[LearnerState, UpdateReport], bool | None] | None = None,
    pool_factory: Callable[[int, int, int], HostPool] | None = None,
    profile_after: int = 0,
) -> RunResult:
    """Runs `state` to `num_updates` updates with `dc.actors` actor threads.

    Returns when done, or when Ctrl-C / SIGTERM arrives (`interrupted` says which; `state` is
    the last whole update's), or when `on_update` returns True (a stop check found the target:
    `state` is the update it checked). An actor's exception stops every thread and is raised
    here as ActorFailed with the actor's traceback. `pool_factory(actor, num_envs, seed)` makes
    an actor's pool (default: `make_pool` of `dc.env_id`). The profile counts from the end of
    update `start + profile_after` on (0: from the start, compilation included).
    """
    config = learner.config
    dc.check(config)
    lag = SCHEDULES[dc.schedule]
    start = int(state.update)
    per_actor = config.num_envs // dc.actors
    if pool_factory is None:

        def pool_factory(actor, n, seed):
            return make_pool(
                dc.env_id, n, seed, dc.envpool_batch_size, dc.vectorization, dc.envpool_threads
            )

    stop = threading.Event()
    store = ParamStore(stop)
    store.publish(start, learner.acting(state))

    def get_params(segment: int) -> tuple[int, ActingParams]:
        if lag is None:
            return store.latest()
        version = max(segment - lag, start)
        return version, store.wait(version)

    if lag is None:  # free: one queue, segments in arrival order
        shared = queue.Queue(dc.queue_size * dc.actors)
        queues = [shared] * dc.actors
    else:  # lock-step: the learner takes actor 0's, then actor 1's... segment of each update
        queues = [queue.Queue(dc.queue_size) for _ in range(dc.actors)]
    act = make_act(jax.random.fold_in(jax.random.key(dc.seed), 3))
    actors = [
        Actor(
            a,
            lambda a=a: pool_factory(a, per_actor, dc.pool_seed(start, a)),
            act,
            get_params,
            queues[a],
            stop,
            config.num_steps,
            first_segment=start,
        )
        for a in range(dc.actors)
    ]
    timer = PhaseTimer("learner")
    times: list[float] = []
    interrupted = None

    def take(q: queue.Queue) -> SegmentMsg:
        while True:
            try:
                return q.get(timeout=0.05)
            except queue.Empty:
                if stop.is_set():
                    raise Stopped from None

    try:
        with _sigterm_as_interrupt():
            for a in actors:
                a.start()
            for update in range(start, num_updates):
                t = time.perf_counter()
                if lag is None:
                    msgs = sorted((take(shared) for _ in actors), key=lambda m: m.actor)
                else:
                    msgs = [take(q) for q in queues]
                    assert all(m.index == update for m in msgs), [m.index for m in msgs]
                t = timer.add("wait_data", t)
                segment = as_device(stack_segments(msgs))
                new_state, info = learner.update(state, segment)
                jax.block_until_ready(new_state)
                state = new_state
                t = timer.add("learn", t)
                store.publish(update + 1, learner.acting(state))
                times.append(time.perf_counter())
                if profile_after and update + 1 == start + profile_after:
                    for thread_timer in (timer, *(a.timer for a in actors)):
                        thread_timer.restart()
                    t = time.perf_counter()
                if on_update is not None:
                    report = UpdateReport(
                        update=update + 1,
                        env_steps=(update + 1) * config.batch_size,
                        loss=jax.tree.map(np.asarray, info),
                        episode_returns=np.concatenate([m.episode_returns for m in msgs]),
                        staleness=float(np.mean([update - m.version for m in msgs])),
                    )
                    done = on_update(state, report)
                    timer.add("report", t)
                    if done:
                        break
    except Stopped:
        pass  # an actor failed: raised below, with its traceback
    except KeyboardInterrupt as e:
        interrupted = "SIGTERM" if isinstance(e, Terminated) else "SIGINT"
    finally:
        stop.set()
        for a in actors:
            if a.is_alive() or a.ident is not None:
                a.join(timeout=30)
    failed = [a for a in actors if a.error is not None]
    if failed:
        a = failed[0]
        raise ActorFailed(f"actor {a.index} raised; its traceback:\n{a.error}")
    profile = [timer.report(), *(a.timer.report() for a in actors)]
    return RunResult(state, interrupted, profile, times)


def format_profile(profile: list[dict[str, Any]]) -> str:
    """A table: per thread, seconds and share of its wall time in each phase."""
    phases = ["policy", "env", "record", "wait_params", "wait_queue", "wait_data", "learn"]
    phases += sorted({p for r in profile for p in r["phases_s"]} - set(phases))
    header = f"{'thread':<10}{'wall s':>8}" + "".join(f"{p:>13}" for p in phases)
    lines = [header]
    for r in profile:
        wall = max(r["wall_s"], 1e-9)
        cells = []
        for p in phases:
            s = r["phases_s"].get(p)
            cells.append(f"{'':>13}" if s is None else f"{s:6.2f} {100 * s / wall:4.0f}%")
        lines.append(f"{r['thread']:<10}{r['wall_s']:8.2f}" + "".join(f"{c:>13}" for c in cells))
    lines.append(
        "acting = policy + env + record; waiting = wait_*; a side that mostly waits is not the "
        "bottleneck"
    )
    return "\n".join(lines)
