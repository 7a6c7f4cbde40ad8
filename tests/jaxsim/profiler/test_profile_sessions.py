"""jaxsim.profile(fn) splits its traced calls into trace sessions of bounded size."""

import jax
import jax.numpy as jnp
import pytest

from jaxsim.profiler import _callable, _events, _session, profile

PHASES = ("step", "update")


def _loop(x):
    # A loop of small ops: each iteration's ops are traced one by one (many events per call).
    def body(_, x):
        with jax.named_scope("step"):
            x = jnp.sin(x) * 1.0001
        with jax.named_scope("update"):
            x = x + x[::-1] * 0.5
        return x

    return jax.lax.fori_loop(0, 40, body, x)


@pytest.fixture(scope="module")
def loop():
    f = jax.jit(_loop)
    x = jnp.ones((256,), jnp.float32)
    return lambda: f(x)


def _profile(fn, monkeypatch, budget, **kwargs):
    """profile(fn) with sessions of about `budget` events; also the sessions' event counts."""
    counts = []
    stop = _session.TraceSession.stop

    def counting_stop(self, export=True):
        data = stop(self, export)
        counts.append(_events.count_events(data))
        return data

    with monkeypatch.context() as m:
        m.setattr(_callable, "_SESSION_EVENTS", budget)
        m.setattr(_session.TraceSession, "stop", counting_stop)
        report = profile(fn, phases=PHASES, iterations=3, calibration=3, repeats=3, min_time=0,
                         **kwargs)  # fmt: skip
    return report, counts[1:]  # the first session only counts one call's events


def test_split_sessions_read_the_same_events_as_one(loop, monkeypatch):
    one, one_counts = _profile(loop, monkeypatch, 10**9)
    split, split_counts = _profile(loop, monkeypatch, 1)  # one planned call per session
    assert len(one_counts) == 1
    # Three attributed and three calibration calls, one or two per session: a later session
    # starts with a calibration call (the first call after a stop runs slower).
    assert len(split_counts) == 4
    assert max(split_counts) < one_counts[0]
    # The attributed calls' events, read session by session, are those one session holds:
    # the same op events per phase and dispatches per call.
    events = {r.name: r.events for r in one.rows if r.events}
    assert sum(events.values()) > 80 and events.get("step", 0) > 0 and events.get("update", 0) > 0
    assert {r.name: r.events for r in split.rows if r.events} == pytest.approx(events)
    assert split.dispatches_per_iteration == pytest.approx(one.dispatches_per_iteration)
    assert split.iterations == one.iterations == 3
    assert any("4 trace sessions" in n for n in split.notes)
    assert not any("trace sessions" in n for n in one.notes)


def test_split_sessions_write_a_trace_with_an_attributed_call(loop, monkeypatch, tmp_path):
    report, _ = _profile(loop, monkeypatch, 1, out_dir=tmp_path, name="loop", png=False)
    assert report.files["xplane"].endswith("loop.xplane.pb")
    assert (tmp_path / "loop.trace.json.gz").exists()
    data = jax.profiler.ProfileData.from_file(str(tmp_path / "loop.xplane.pb"))
    names = {e.name for p in data.planes for line in p.lines for e in line.events}
    assert _events.STEP_NAME in names
    assert any("the trace files hold session" in n for n in report.notes)


def test_a_later_session_starts_with_a_calibration_call():
    step, cal = _events.STEP_NAME, _events.CAL_NAME
    plan = [(cal, 0), (step, 0), (cal, 1), (step, 1), (step, 2), (cal, 2)]
    calls = list(plan)
    assert _callable._next_calls(calls, 0, 2, calibration_first=False) == plan[:2]
    # The next calibration call within reach moves to the front ...
    assert _callable._next_calls(calls, 1, 2, calibration_first=True) == [(cal, 1), (step, 0)]
    # ... or, out of reach, comes along as one call more.
    assert _callable._next_calls(calls, 3, 1, calibration_first=True) == [(cal, 2), (step, 1)]
    assert sorted(calls) == sorted(plan)
    assert _callable._next_calls(calls, 5, 3, calibration_first=True) == [(step, 2)]
