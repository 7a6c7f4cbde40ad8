"""A jax profiler trace (ProfileData) -> the events inside the profiled windows, each op
looked up in the HLO: what `_trace` attributes to phases."""

from __future__ import annotations

import bisect
import dataclasses

from jaxsim.profiler._hlo import UNSCOPED, PhaseMap

STEP_NAME = "jaxsim.profile.step"  # StepTraceAnnotation around each traced iteration
CAL_NAME = "jaxsim.profile.calibration"  # traced calls that only calibrate the overhead
RUN_NAME = "jaxsim.profile.run"  # TraceAnnotation around a `with jaxsim.profile():` block
WAIT_NAME = "jaxsim.profile.wait"  # TraceAnnotation around block_until_ready after each call
PROBE_OPS = "jaxsim.profile.probe.ops"  # the op-overhead probe's traced runs
PROBE_HOST = "jaxsim.profile.probe.host"  # the host-event-overhead probe's traced runs
WINDOW_NAMES = (STEP_NAME, RUN_NAME, PROBE_OPS, PROBE_HOST)  # windows that are attributed


@dataclasses.dataclass(slots=True)
class OpEvent:
    start: int  # ns
    end: int
    module: str
    op: str
    run_id: object
    container: bool
    mix: dict[str, float]
    unscoped_paths: dict[str, float]
    estimated: bool
    scalar: bool  # the instruction's output is a scalar (for overhead calibration)
    unmatched: bool  # no HLO text holds this instruction

    @property
    def main_phase(self) -> str:
        return max(self.mix, key=self.mix.get) if self.mix else UNSCOPED


@dataclasses.dataclass(slots=True)
class HostEvent:
    start: int
    end: int
    name: str
    stats: dict


@dataclasses.dataclass
class Trace:
    ops: list[OpEvent]
    host: list[HostEvent]  # events on the thread that ran the profiled code
    modules: set[str]  # modules whose ops appear in the trace
    missing: set[str]  # of those, modules whose HLO text (of this compilation) is unknown
    unread: dict[str, int]  # device planes whose events name no HLO op (if none named one)


@dataclasses.dataclass
class Events:
    """The events of one or more traces that windows overlap, before any HLO is looked up.

    What `read` keeps of a ProfileData, so that the ProfileData (about a kilobyte per event
    of the whole trace) can go as soon as it is read, several trace sessions can be read one
    after the other, and a second HLO lookup (`resolve`) needs no second pass over the trace.
    """

    ops: list[tuple[int, int, str, str, object]] = dataclasses.field(default_factory=list)
    # (start, end, module, op, run_id) of each op event
    host: list[HostEvent] = dataclasses.field(default_factory=list)
    unread: dict[str, int] = dataclasses.field(default_factory=dict)
    device_ops: int = 0  # op events on device planes
    end: int = 0  # the latest end of any event read (ns)

    def extend(self, other: Events) -> None:
        self.ops += other.ops
        self.host += other.host
        for plane, n in other.unread.items():
            self.unread[plane] = self.unread.get(plane, 0) + n
        self.device_ops += other.device_ops
        self.end = max(self.end, other.end)


def _stats(event) -> dict:
    try:
        return dict(event.stats)
    except Exception:  # a stat jax cannot decode must not sink the whole profile
        return {}


def _ranges(data, names) -> list[tuple[int, int]]:
    """[start, end] of the host events named in `names` (the windows to read), merged."""
    spans = []
    for plane in data.planes:
        if plane.name.startswith("/device:"):
            continue
        for line in plane.lines:
            for ev in line.events:
                if ev.name in names:
                    start = int(ev.start_ns)
                    spans.append((start, start + int(ev.duration_ns)))
    spans.sort()
    merged: list[list[int]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def count_events(data) -> int:
    """All events of a ProfileData, on every plane and line."""
    return sum(1 for plane in data.planes for line in plane.lines for _ in line.events)


def read(data, names=WINDOW_NAMES, offset: int = 0) -> Events:
    """Reads op events (any plane) and the profiled thread's host events from a ProfileData.

    Only events that overlap a window named in `names` are read (reading an event's stats is
    what costs): calibration calls and the rest of the trace are skipped. A trace's times
    count from the start of its session: `offset` (ns) is added to each, so that the events
    of sessions read into one Events do not overlap (`after` gives one).
    """
    out = Events()
    ranges = _ranges(data, frozenset(names))
    if not ranges:
        return out
    starts = [a for a, _ in ranges]

    def wanted(start: int, end: int) -> bool:
        k = bisect.bisect_right(starts, end) - 1
        return k >= 0 and ranges[k][1] >= start and ranges[k][0] <= end

    for plane in data.planes:
        lines = list(plane.lines)
        # On GPU/TPU device planes, "XLA Ops" holds one event per executed HLO op; the stream
        # lines repeat them kernel by kernel, so take only that line where it exists.
        xla_ops = [line for line in lines if line.name == "XLA Ops"]
        is_device = plane.name.startswith("/device:")
        for line in xla_ops or lines:
            host_events = []
            for ev in line.events:
                start = int(ev.start_ns)
                end = start + int(ev.duration_ns)
                if not wanted(start, end):
                    continue
                start, end = start + offset, end + offset
                out.end = max(out.end, end)
                stats = _stats(ev)
                op = stats.get("hlo_op")
                if op is None and line.name == "XLA Ops":
                    op = ev.name.lstrip("%").split(" ")[0]
                if op is not None:
                    module = str(stats.get("hlo_module", ""))
                    out.device_ops += is_device
                    out.ops.append((start, end, module, str(op), stats.get("run_id")))
                elif is_device:
                    out.unread[plane.name] = out.unread.get(plane.name, 0) + 1
                else:
                    host_events.append(HostEvent(start, end, ev.name, stats))
            if any(e.name in WINDOW_NAMES for e in host_events):  # the thread that ran fn
                out.host += host_events
    return out


def after(events: Events) -> int:
    """An `offset` for `read` that places a later session's events after all of `events`."""
    return events.end + 1_000_000_000 if events.end else 0


def resolve(events: Events, phase_map: PhaseMap) -> Trace:
    """The events read from traces, each op looked up in the HLO (`phase_map`)."""
    ops: list[OpEvent] = []
    modules: set[str] = set()
    for start, end, module, op, run_id in events.ops:
        modules.add(module)
        mix, instr = phase_map.lookup(module, op)
        ops.append(
            OpEvent(
                start=start,
                end=end,
                module=module,
                op=op,
                run_id=run_id,
                container=bool(instr is not None and instr.is_container),
                mix=mix.phases,
                unscoped_paths=mix.unscoped_paths,
                estimated=mix.estimated,
                scalar=instr is not None and instr.is_scalar,
                unmatched=instr is None,
            )
        )
    missing = {e.module for e in ops if e.unmatched}
    unread = {} if events.device_ops else dict(events.unread)
    return Trace(ops=ops, host=list(events.host), modules=modules, missing=missing, unread=unread)
