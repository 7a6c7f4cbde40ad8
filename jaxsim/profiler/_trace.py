"""The events of a trace's windows (`_events`) -> each window's wall time split into phases
and host time."""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections import Counter, defaultdict

from jaxsim.profiler._events import STEP_NAME, WAIT_NAME, HostEvent, OpEvent, Trace

# Host keys of the wall-time partition (device and idle time are keyed by phase name).
DISPATCH = "(dispatch)"  # host inside a jax dispatch (cache lookup, tracing, launch), device idle
COMPILE = "(compile)"  # host lowering or compiling an executable, device idle
PYTHON = "(python)"  # host running other Python code, device idle
IDLE = "(idle)"  # host waiting for results while no executable runs
HOST_KEYS = (DISPATCH, COMPILE, PYTHON, IDLE)

_DISPATCH_RE = re.compile(r"^(PjitFunction|PmapFunction)\b|LoadedExecutable::Execute")
_COMPILE_RE = re.compile(
    r"^(lower_sharding_computation|lower_mesh_computation|backend_compile\w*|"
    r"compile_or_get_cached|jaxsim\.profile\.compile)$"
)
_LAUNCH_RE = re.compile(r"LoadedExecutable::(Execute\w*)$")

Key = tuple[str, str]  # ("device" | "idle" | "host", phase or host key)


@dataclasses.dataclass
class Window:
    """What happened during one traced window (an iteration, or a whole run). Times in seconds.

    The overhead counts say where the cost of tracing falls: `in_events[key]` op events whose
    own span is attributed to `key`, `after_events[key]` op events whose end is followed by
    `key` (the recording cost after an event lands there), `host_events[key]` host trace events
    (annotations, dispatch internals) that start in a host segment `key`.
    """

    step: int
    wall: float
    time: dict[Key, float]
    in_events: dict[Key, float]
    after_events: dict[Key, float]
    host_events: dict[Key, float]
    op_events: int
    host_event_count: int  # all host events on the profiled thread, hidden or not
    scalar_durations: list[float]
    estimated: float  # device seconds split between phases by the cost model
    unscoped_paths: dict[str, float]
    launches: int  # executable launches (dispatches to the device)
    executables: dict[str, int]  # module -> launches
    busy: float  # device-busy seconds (some leaf op running)


def windows(trace: Trace, phases: frozenset[str], step_name: str = STEP_NAME) -> list[Window]:
    """Splits each window named `step_name`, instant by instant, into one key per instant.

    Device busy wins: time when an op runs goes to its phase (concurrent ops share it equally).
    Time inside a running executable with no op running (a loop's control, the gap before the
    next kernel) is the device idle between launches, keyed ("idle", phase): the phase of the
    enclosing control-flow op, else of the next kernel. Otherwise the host decides: inside
    compilation -> (compile), inside an annotation named after a phase -> that phase (host),
    inside a jax dispatch -> (dispatch), inside the harness's wait -> (idle), else (python).
    """
    steps = sorted(
        (e for e in trace.host if e.name == step_name and int(e.stats.get("step_num", 0)) >= 0),
        key=lambda e: e.start,
    )
    ops = sorted(trace.ops, key=lambda e: e.start)
    op_starts = [e.start for e in ops]
    reach = []  # reach[k]: the latest end among ops[: k + 1]
    for e in ops:
        reach.append(max(e.end, reach[-1]) if reach else e.end)
    host = sorted(trace.host, key=lambda e: e.start)
    host_starts = [e.start for e in host]
    out = []
    for i, step in enumerate(steps):
        lo = bisect.bisect_left(host_starts, step.start)
        hi = bisect.bisect_left(host_starts, step.end)
        window_ops = [
            e for e in ops[: bisect.bisect_left(op_starts, step.end)] if e.end > step.start
        ]
        out.append(
            _window(
                int(step.stats.get("step_num", i)),
                step.start,
                step.end,
                window_ops,
                [e for e in host[lo:hi] if e is not step],
                phases,
            )
        )
    return out


def _host_kind(name: str, phases) -> str | None:
    if name in phases:
        return "annotation"
    if name == WAIT_NAME:
        return "wait"
    if _COMPILE_RE.match(name):
        return "compile"
    if _DISPATCH_RE.search(name):
        return "dispatch"
    return None


def _runs(ops: list[OpEvent]) -> list[tuple[int, int]]:
    """[start, end] of each executable run (ops sharing module and run_id)."""
    span: dict[tuple[str, object], list[int]] = {}
    for e in ops:
        if e.run_id is None:
            continue
        s = span.setdefault((e.module, e.run_id), [e.start, e.end])
        s[0], s[1] = min(s[0], e.start), max(s[1], e.end)
    return [(a, b) for a, b in span.values()]


def _window(step, ws, we, ops, host, phases) -> Window:
    marks: list[tuple[int, int, str, int]] = []  # (time, order, kind, index); ends before starts
    for i, e in enumerate(ops):
        kind = "container" if e.container else "leaf"
        marks += [(max(e.start, ws), 1, kind, i), (min(e.end, we), 0, kind, i)]
    for i, (a, b) in enumerate(_runs(ops)):
        marks += [(max(a, ws), 1, "run", i), (min(b, we), 0, "run", i)]
    kinds = [_host_kind(e.name, phases) for e in host]
    # A dispatch that compiles (jit's first call) is compile time from its start: tracing the
    # function to a jaxpr comes before the lowering and compile events inside it.
    compiles = sorted(e.start for e, k in zip(host, kinds, strict=True) if k == "compile")
    for i, e in enumerate(host):
        kind = kinds[i]
        if kind == "dispatch" and compiles:
            k = bisect.bisect_left(compiles, e.start)
            if k < len(compiles) and compiles[k] < e.end:
                kind = "compile"
        if kind is not None:
            marks += [(max(e.start, ws), 1, kind, i), (min(e.end, we), 0, kind, i)]
    marks.sort()
    leaf_starts = sorted((e.start, i) for i, e in enumerate(ops) if not e.container)
    active: dict[str, set[int]] = defaultdict(set)
    time: Counter = Counter()
    unscoped: Counter = Counter()
    estimated = busy = 0.0
    # Every segment of the window with what it was attributed to (key -> fraction).
    seg_starts: list[int] = []
    seg_ends: list[int] = []
    seg_keys: list[dict[Key, float]] = []
    t_prev = ws
    for t, order, kind, i in [*marks, (we, 0, "", -1)]:
        t = min(max(t, ws), we)
        dt = (t - t_prev) * 1e-9
        if dt > 0:
            leaves = active["leaf"]
            weights: dict[Key, float] = Counter()
            if leaves:
                busy += dt
                share = 1.0 / len(leaves)
                for j in leaves:
                    e = ops[j]
                    for phase, frac in e.mix.items():
                        weights[("device", phase)] += share * frac
                    for path, frac in e.unscoped_paths.items():
                        unscoped[path] += dt * share * frac
                    if e.estimated:
                        estimated += dt * share
            else:
                key = _gap_key(active, ops, host, leaf_starts, t_prev)
                weights[key] = 1.0
            for key, w in weights.items():
                time[key] += dt * w
            seg_starts.append(t_prev)
            seg_ends.append(t)
            seg_keys.append(weights)
            t_prev = t
        if i >= 0:
            (active[kind].add if order == 1 else active[kind].discard)(i)

    def segment_at(t: int) -> dict[Key, float] | None:
        k = bisect.bisect_right(seg_starts, t) - 1
        if 0 <= k < len(seg_starts) and t < seg_ends[k]:
            return seg_keys[k]
        return None

    in_events: Counter = Counter()
    after_events: Counter = Counter()
    host_events: Counter = Counter()
    scalar_durations = []
    runs: dict[str, set] = defaultdict(set)
    n_ops = 0
    for e in ops:
        if not (ws <= e.start < we):
            continue
        n_ops += 1
        if e.container:
            in_events[("idle", e.main_phase)] += 1
        else:
            for phase, frac in e.mix.items():
                in_events[("device", phase)] += frac
            if e.scalar:
                scalar_durations.append((e.end - e.start) * 1e-9)
        for key, w in (segment_at(e.end) or {}).items():
            after_events[key] += w
        runs[e.module].add(e.run_id)
    for e in host:
        seg = segment_at(max(e.start, ws))
        if seg and len(seg) == 1:
            (key,) = seg
            if key[0] == "host":
                host_events[key] += 1
    launches = _count_outermost([e for e in host if _LAUNCH_RE.search(e.name)])
    executables = {m: len(r) for m, r in runs.items()}
    if launches == 0:
        launches = sum(executables.values())
    return Window(
        step=step,
        wall=(we - ws) * 1e-9,
        time=dict(time),
        in_events=dict(in_events),
        after_events=dict(after_events),
        host_events=dict(host_events),
        op_events=n_ops,
        host_event_count=len(host),
        scalar_durations=scalar_durations,
        estimated=estimated,
        unscoped_paths=dict(unscoped),
        launches=launches,
        executables=executables,
        busy=busy,
    )


def _gap_key(active, ops, host, leaf_starts, t) -> Key:
    if active["container"]:
        j = max(active["container"], key=lambda j: ops[j].start)
        return ("idle", ops[j].main_phase)
    if active["run"]:
        k = bisect.bisect_left(leaf_starts, (t, -1))
        if k < len(leaf_starts):
            return ("idle", ops[leaf_starts[k][1]].main_phase)
    for kind in ("compile", "annotation", "dispatch", "wait"):
        if active[kind]:
            if kind == "annotation":
                j = max(active[kind], key=lambda j: host[j].start)
                return ("host", host[j].name)
            return ("host", {"compile": COMPILE, "dispatch": DISPATCH, "wait": IDLE}[kind])
    return ("host", PYTHON)


def _count_outermost(events: list[HostEvent]) -> int:
    count, reach = 0, -1
    for e in sorted(events, key=lambda e: (e.start, -e.end)):
        if e.start >= reach:
            count += 1
            reach = e.end
        else:
            reach = max(reach, e.end)
    return count
