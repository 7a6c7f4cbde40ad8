"""The decoupled (actor-learner) mode on host simulators: schedules, V-trace, failures, CLI."""

import importlib.util
import os
import signal
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents import losses
from agents.decoupled import (
    EXTRA_INSTALL,
    ActorFailed,
    DecoupledConfig,
    HostPPO,
    run_decoupled,
)
from agents.decoupled.actor import Segment
from agents.decoupled.host_envs import make_pool
from agents.decoupled.learner import vtrace_advantages
from agents.ppo import PPOConfig

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # Gymnasium's Box precision notes

HAS_ENVPOOL = importlib.util.find_spec("envpool") is not None
HAS_RLAX = importlib.util.find_spec("rlax") is not None
needs_envpool = pytest.mark.skipif(
    not HAS_ENVPOOL, reason=f"EnvPool is not installed: {EXTRA_INSTALL} (or pip install envpool)"
)
needs_rlax = pytest.mark.skipif(
    not HAS_RLAX, reason=f"rlax is not installed: {EXTRA_INSTALL} (or pip install rlax)"
)

ENV = "gymnasium/CartPole-v1"
TINY = PPOConfig(
    total_steps=4 * 8 * 3, num_envs=4, num_steps=8, update_epochs=1, num_minibatches=1, hidden=(8,)
)


@pytest.fixture(scope="module")
def learner():
    pool = make_pool(ENV, 1, 0)
    try:
        return HostPPO(TINY, pool.observation_space, pool.action_space, ENV, vtrace=False)
    finally:
        pool.close()


def _run(learner, seed=0, schedule="reproducible", actors=2, **kw):
    dc = DecoupledConfig(ENV, schedule=schedule, actors=actors, seed=seed)
    return run_decoupled(learner, dc, learner.init(jax.random.key(seed)), TINY.num_updates, **kw)


def _leaves(state):
    return [np.asarray(x) for x in jax.tree.leaves((state.params, state.opt_state))]


def test_reproducible_schedule_is_bitwise_repeatable(learner):
    a, b = _run(learner, seed=0), _run(learner, seed=0)
    assert int(a.state.update) == TINY.num_updates
    assert all(
        np.array_equal(x, y) for x, y in zip(_leaves(a.state), _leaves(b.state), strict=True)
    )
    c = _run(learner, seed=1)
    assert not all(
        np.array_equal(x, y) for x, y in zip(_leaves(a.state), _leaves(c.state), strict=True)
    )
    threads = {r["thread"] for r in a.profile}
    assert threads == {"learner", "actor-0", "actor-1"}
    assert "learn" in a.profile[0]["phases_s"] and "policy" in a.profile[1]["phases_s"]


@needs_envpool
def test_reproducible_schedule_on_envpool_is_bitwise_repeatable(learner):
    # EnvPool's CartPole has Gymnasium's spaces: the same learner (and compiled update) serves.
    dc = DecoupledConfig("envpool/CartPole-v1", actors=2, seed=3)
    a, b = (
        run_decoupled(learner, dc, learner.init(jax.random.key(3)), TINY.num_updates)
        for _ in range(2)
    )
    assert all(
        np.array_equal(x, y) for x, y in zip(_leaves(a.state), _leaves(b.state), strict=True)
    )


def test_schedules_lag_as_documented(learner):
    lags = {}
    for schedule in ("sync", "reproducible"):
        seen = []
        _run(learner, schedule=schedule, on_update=lambda s, r, seen=seen: seen.append(r.staleness))
        lags[schedule] = seen
    assert lags["sync"] == [0.0] * TINY.num_updates
    assert lags["reproducible"] == [0.0] + [1.0] * (TINY.num_updates - 1)


@needs_rlax
def test_vtrace_on_policy_equals_gae():
    # With the acting policy's own log-probabilities (rho = 1), V-trace's targets are the
    # lambda-returns and its advantages GAE's, episode ends (terminated and truncated) included.
    T, B, gamma, lam = 12, 3, 0.9, 0.8
    rng = np.random.default_rng(0)
    value, next_value, reward = (rng.normal(size=(T, B)).astype(np.float32) for _ in range(3))
    terminated = rng.random((T, B)) < 0.15
    truncated = ~terminated & (rng.random((T, B)) < 0.15)
    # Within an episode the next observation is the next step's: so are their values.
    within = ~(terminated | truncated)[:-1]
    next_value[:-1] = np.where(within, value[1:], next_value[:-1])

    class Policy:  # evaluate(obs, action) -> (log_prob, entropy, value): obs is the value here
        def evaluate(self, obs, action):
            return jnp.zeros_like(obs), None, obs

    seg = Segment(
        obs=value,
        action=np.zeros((T, B), np.int32),
        reward=reward,
        terminated=terminated,
        truncated=truncated,
        next_obs=next_value,
        extras={"log_prob": np.zeros((T, B), np.float32)},
    )
    adv, target, v = vtrace_advantages(gamma, lam)(Policy(), seg, jnp.asarray(reward))
    gae_adv, gae_target = losses.gae(
        jnp.asarray(reward), value, next_value, terminated, truncated, gamma, lam
    )
    np.testing.assert_allclose(adv, gae_adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(target, gae_target, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(v, value)


class _FailingPool:
    """Wraps a pool; its recv raises on the third call."""

    def __init__(self, pool):
        self.pool, self.calls = pool, 0

    def __getattr__(self, name):
        return getattr(self.pool, name)

    def recv(self):
        self.calls += 1
        if self.calls == 3:
            raise RuntimeError("simulated simulator crash")
        return self.pool.recv()


def test_failing_actor_stops_the_run_with_its_traceback(learner):
    def factory(actor, n, seed):
        pool = make_pool(ENV, n, seed)
        return _FailingPool(pool) if actor == 1 else pool

    outcome = {}

    def target():
        try:
            _run(learner, pool_factory=factory)
        except ActorFailed as e:
            outcome["error"] = str(e)

    before = threading.active_count()
    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout=120)
    assert not t.is_alive(), "the run hung after an actor raised"
    assert "actor 1 raised" in outcome["error"]
    assert "simulated simulator crash" in outcome["error"] and "in recv" in outcome["error"]
    assert threading.active_count() == before  # every actor thread ended


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM"])
def test_signal_stops_after_a_whole_update(learner, how):
    def on_update(state, report):
        if report.update == 2:
            if how == "SIGINT":
                raise KeyboardInterrupt
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler raises in this (the main) thread meanwhile

    before = threading.active_count()
    result = _run(learner, on_update=on_update)
    assert result.interrupted == how
    assert int(result.state.update) == 2
    assert threading.active_count() == before
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_minatar_pool_spaces():
    pytest.importorskip("minatar", reason=f"MinAtar is not installed: {EXTRA_INSTALL}")
    pool = make_pool("gymnasium/MinAtar/Breakout-v0", 2, 0)
    try:
        assert pool.observation_space.shape == (10, 10, 4)
        assert pool.action_space.n == 6
        rows = pool.reset()
        assert rows.obs.dtype == np.float32 and not rows.transition.any()
    finally:
        pool.close()


@needs_envpool
def test_envpool_sync_pool_resets_in_the_same_step():
    pool = make_pool("envpool/CartPole-v1", 4, 0)
    try:
        rows = pool.reset()
        ends = 0
        for _ in range(60):
            pool.send(np.zeros(4, np.int32), rows.env_ids)
            rows = pool.recv()
            assert rows.transition.all()
            done = rows.terminated | rows.truncated
            ends += done.sum()
            # A finished environment shows its terminal observation as final_obs and a fresh
            # episode's (|x| <= 0.05 at reset) as obs, within the same row.
            assert (np.abs(rows.final_obs[done][:, 2]) > 0.2).all()
            assert (np.abs(rows.obs[done]) <= 0.05).all()
        assert ends > 0
    finally:
        pool.close()


@needs_envpool
@needs_rlax
def test_free_schedule_on_async_envpool_learns_from_stale_segments():
    env = "envpool/CartPole-v1"
    pool = make_pool(env, 1, 0)
    learner = HostPPO(TINY, pool.observation_space, pool.action_space, env, vtrace=True)
    pool.close()
    dc = DecoupledConfig(env, schedule="free", actors=2, envpool_batch_size=1, queue_size=2)
    reports = []
    result = run_decoupled(
        learner,
        dc,
        learner.init(jax.random.key(0)),
        TINY.num_updates,
        on_update=lambda s, r: reports.append(r),
    )
    assert int(result.state.update) == TINY.num_updates
    assert all(np.isfinite(r.loss.total) for r in reports)
    assert all(r.staleness >= 0 for r in reports)


def _profile(learn, acting_phases, cpu_s, wall_s):
    learner = {"thread": "learner", "wall_s": wall_s, "process_cpu_s": cpu_s,
               "phases_s": {"wait_data": sum(acting_phases.values()), "learn": learn}}  # fmt: skip
    actor = {"thread": "actor-0", "wall_s": wall_s, "process_cpu_s": cpu_s,
             "phases_s": {"wait_params": learn, **acting_phases}}  # fmt: skip
    return [learner, actor]


def test_overlap_bound_is_the_smaller_of_the_phase_and_core_bounds():
    from agents.decoupled.bench import overlap_bound

    # Learning 3 s, acting 1 s (its waits not counted), a quarter of two cores busy: the phases
    # bind, 4/3.
    b = overlap_bound(_profile(3.0, {"policy": 0.5, "env": 0.4, "record": 0.1}, 1.0, 4.0), 2)
    assert (b["learn_s"], b["acting_s"]) == (3.0, 1.0)
    assert b["phases"] == pytest.approx(4 / 3) and b["cores"] == pytest.approx(8.0)
    assert b["bound"] == pytest.approx(4 / 3)
    # Balanced sides, but the loop already keeps 1.8 of 2 cores busy: the cores bind, 2/1.8.
    b = overlap_bound(_profile(2.0, {"policy": 1.0, "env": 1.0}, 7.2, 4.0), 2)
    assert b["phases"] == pytest.approx(2.0) and b["bound"] == pytest.approx(2 / 1.8)


def test_phase_timer_reports_the_process_cpu_time_of_its_span():
    from agents.decoupled.actor import PhaseTimer

    timer = PhaseTimer("t")
    busy = time.process_time()
    while time.process_time() - busy < 0.15:  # busy: CPU time passes
        pass
    timer.restart()  # and is forgotten
    time.sleep(0.2)  # idle: wall time passes, little CPU
    report = timer.report()
    assert report["wall_s"] >= 0.2 and report["process_cpu_s"] < 0.1
