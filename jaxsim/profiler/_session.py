"""Shared plumbing: argument checks, trace sessions, the staging folder and atomic outputs."""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from atomicfiles import write_json_atomic
from jaxsim.profiler._hlo import UNSCOPED
from jaxsim.profiler._plot import matplotlib_missing, plot_report
from jaxsim.profiler._trace import HOST_KEYS

DEFAULT_PHASES = (
    "rollout",
    "policy",
    "env_step",
    "auto_reset",
    "gae",
    "shuffle",
    "loss",
    "backward",
    "optimizer",
)
"""The named scopes of `jaxsim.rollout` and of the PPO training loop in agents/."""

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


# ------------------------------------------------------------------------------- input checking
def check_phases(phases) -> tuple[str, ...]:
    if isinstance(phases, str) or not isinstance(phases, Sequence):
        raise TypeError(f"profile: phases must be a sequence of names, got {phases!r}")
    phases = tuple(phases)
    if not phases:
        raise ValueError("profile: phases is empty; give at least one jax.named_scope name")
    for p in phases:
        if not isinstance(p, str) or not p or "/" in p or ";" in p:
            raise ValueError(f"profile: phase names are non-empty, without '/' or ';'; got {p!r}")
        if p in (UNSCOPED, *HOST_KEYS):
            raise ValueError(f"profile: {p!r} is reserved for the report's own rows")
    dup = [p for p, n in Counter(phases).items() if n > 1]
    if dup:
        raise ValueError(f"profile: phases listed twice: {dup}")
    return phases


def check_count(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"profile: {name} must be an integer >= {minimum}, got {value!r}")
    return value


def check_name(name) -> str:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ValueError(f"profile: name must be a file-name stem like 'ppo_scan', got {name!r}")
    return name


def check_hlo(hlo) -> list[str]:
    hlo = [hlo] if isinstance(hlo, str) else list(hlo)
    if not all(isinstance(t, str) for t in hlo):
        raise TypeError("profile: hlo must be HLO texts (compiled.as_text())")
    return hlo


# ------------------------------------------------------------------------------------ staging
def staging_dir(out_dir) -> tuple[Path, Path, Path | None]:
    """Creates out_dir if needed and a hidden staging folder in it; clear errors if unwritable.

    Returns (out_dir, staging folder, the outermost folder created here or None).
    """
    out = Path(out_dir)
    created = None
    if not out.exists():
        created = out
        while not created.parent.exists():
            created = created.parent
    try:
        out.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".jaxsim-profile-", dir=out))
    except OSError as e:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise OSError(
            f"profile: cannot write to output directory {str(out)!r} ({e.strerror or e}); "
            "nothing was run"
        ) from e
    return out, staging, created


class Workspace:
    """The scratch folder of one profile, and the output folder's staging area if any.

    On failure (`discard`) everything it made goes, folders it created included; outputs appear
    in the output folder only at the end, each by an atomic rename.
    """

    def __init__(self, out_dir):
        self.out = self.staging = self.created = None
        if out_dir is not None:
            self.out, self.staging, self.created = staging_dir(out_dir)
        self.scratch = self.staging or Path(tempfile.mkdtemp(prefix="jaxsim-profile-"))

    def discard(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)
        if self.created is not None:
            shutil.rmtree(self.created, ignore_errors=True)

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)


# ----------------------------------------------------------------------------- trace sessions
def profiler_options():
    import jax

    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0  # Python call events would inflate host time
    return options


def other_trace_running() -> bool:
    try:
        from jax._src import profiler as jax_profiler

        return jax_profiler._profile_state.profile_session is not None
    except (ImportError, AttributeError):
        return False


def check_no_trace() -> None:
    if other_trace_running():
        raise RuntimeError(
            "profile: another jax.profiler trace is running; stop it first (one at a time)"
        )


class TraceSession:
    """One jax profiler session: `start()`, `stop()` -> ProfileData, `export()` -> its files.

    Uses jaxlib's ProfilerSession where it exists, registered where `jax.profiler` looks for
    a running trace (so a second one is refused as usual): stopping it without writing the
    trace files costs a third as much, and the files are written only if an output folder
    wants them. Elsewhere, `jax.profiler.start_trace` into the scratch folder.
    """

    def __init__(self, scratch: Path):
        self.folder = scratch / "trace"
        self._session = self._state = self._xspace = None

    def start(self) -> TraceSession:
        import jax

        check_no_trace()
        try:
            from jax._src import profiler as jax_profiler
            from jax._src.lib import _profiler

            state = jax_profiler._profile_state
            with state.lock:
                if state.profile_session is not None:
                    check_no_trace()
                self._session = _profiler.ProfilerSession(profiler_options())
                state.profile_session = self._session
                self._state = state
        except (ImportError, AttributeError, TypeError):  # another jax: the public API
            self._session = self._state = None
            jax.profiler.start_trace(str(self.folder), profiler_options=profiler_options())
        return self

    def stop(self, export: bool = True):
        """Ends the session; returns its jax.profiler.ProfileData.

        With export=False (no `export()` to follow), the ProfileData is taken straight from the
        session where jaxlib allows: no serialised copy of the trace is made and parsed back.
        """
        import jax

        if self._session is None:
            jax.profiler.stop_trace()
            return load_profile_data(self.folder)
        direct = not export and hasattr(self._session, "stop_and_get_profile_data")
        with self._state.lock:
            try:
                if direct:
                    return self._session.stop_and_get_profile_data()
                self._xspace = self._session.stop()
            finally:
                self._state.profile_session = None
        return jax.profiler.ProfileData.from_serialized_xspace(self._xspace)

    def abort(self) -> None:
        """Stops a session that may still run, discarding what it recorded."""
        import jax

        if self._session is None:
            if other_trace_running():
                with contextlib.suppress(Exception):
                    jax.profiler.stop_trace()
            return
        with self._state.lock:
            if self._state.profile_session is self._session:
                self._state.profile_session = None
                with contextlib.suppress(Exception):
                    self._session.stop()

    def export(self) -> Path:
        """Writes the trace files (.xplane.pb, .trace.json.gz); returns their folder."""
        if self._session is not None and self._xspace is not None:
            self._session.export(self._xspace, str(self.folder))
        return self.folder

    def __enter__(self) -> TraceSession:
        return self.start()

    def __exit__(self, exc_type, *_) -> None:
        if exc_type is not None:
            self.abort()


def release_freed_memory() -> None:
    """Hands the heap pages freed since (a stopped session's events, say) back to the system.

    glibc keeps freed pages for reuse: without this, the process stays as large as the trace
    session at its largest. A no-op where glibc is not the C library.
    """
    global _malloc_trim
    if _malloc_trim is None:
        try:
            _malloc_trim = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError):
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)


_malloc_trim = None


def find_one(folder: Path, pattern: str) -> Path:
    found = sorted(glob.glob(str(folder / "**" / pattern), recursive=True))
    if not found:
        raise RuntimeError(f"profile: jax.profiler wrote no {pattern} under {folder}")
    return Path(found[-1])


def load_profile_data(trace_dir: Path):
    import jax

    return jax.profiler.ProfileData.from_file(str(find_one(trace_dir, "*.xplane.pb")))


# ------------------------------------------------------------------------------------ outputs
def write_outputs(report, trace_dir: Path, ws: Workspace, name: str, png: bool) -> None:
    """Stages `<name>.json`, `.png`, `.trace.json.gz`, `.xplane.pb`, then renames them in."""
    out, staging = ws.out, ws.staging
    staged: dict[str, Path] = {}
    for suffix, pattern in ((".trace.json.gz", "*.trace.json.gz"), (".xplane.pb", "*.xplane.pb")):
        try:
            src = find_one(trace_dir, pattern)
        except RuntimeError:
            report.notes.append(f"jax wrote no {pattern}; not copied")
            continue
        staged[name + suffix] = staging / (name + suffix)
        shutil.copyfile(src, staged[name + suffix])
    if png:
        why = matplotlib_missing()
        if why is None:
            staged[name + ".png"] = staging / (name + ".png")
            plot_report(report, staged[name + ".png"])
        else:
            report.notes.append(why)
    staged[name + ".json"] = staging / (name + ".json")
    kinds = {".json": "json", ".png": "png", ".trace.json.gz": "perfetto", ".xplane.pb": "xplane"}
    report.files = {
        kind: str(out / (name + suffix))
        for suffix, kind in kinds.items()
        if name + suffix in staged
    }
    write_json_atomic(staged[name + ".json"], report.to_dict())
    for fname, path in staged.items():
        os.replace(path, out / fname)
