"""JAX's persistent compilation cache, on by default in jaxsim's commands: compile once a machine.

XLA's compile of a training loop takes seconds on a CPU; the cache stores every executable on
disk, keyed by its program, options and jax version, so a later process that builds the same
program loads it instead (milliseconds). Programs with host callbacks (`jax.debug.callback`)
are never cached by JAX, which is why `agents.train` reports progress between jitted chunks.

    from agents import compile_cache
    compile_cache.enable()                  # ~/.cache/jaxsim/xla, or $JAXSIM_COMPILATION_CACHE
    compile_cache.enable("/tmp/my-cache")   # another folder
    compile_cache.disable()

JAX writes an entry in place and never replaces one that exists, so an entry cut short by a
killed process made every later run warn and recompile. `enable` puts `_RepairingCache` in
front of JAX's: entries are written atomically, and one that does not decompress is deleted on
read (a miss: the program compiles and its entry is written again).
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import jax
from jax.experimental.compilation_cache import compilation_cache

from atomicfiles import atomic_write, remove_stale_temporaries

ENV_VAR = "JAXSIM_COMPILATION_CACHE"
"""Environment variable: the cache folder, or "off" (also "0", "none") to keep it disabled."""

_OFF = ("off", "0", "none", "false", "no")


def default_dir() -> str | None:
    """$JAXSIM_COMPILATION_CACHE if set (None if it says "off"), else $XDG_CACHE_HOME/jaxsim/xla
    (~/.cache/jaxsim/xla)."""
    value = os.environ.get(ENV_VAR)
    if value is not None:
        return None if value.strip().lower() in _OFF else value
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxsim", "xla")


def enable(path: str | os.PathLike | None = None) -> str | None:
    """Turns JAX's persistent compilation cache on in `path` (default: `default_dir()`).

    Every executable is cached, however short its compile (JAX's default skips those under 1 s,
    which on a CPU is most of what a training run compiles). Safe to call after other compiles:
    the cache is reset, so the new folder takes effect.

    Returns:
      The absolute folder in use, or None where $JAXSIM_COMPILATION_CACHE turns the default off
      (the cache is then disabled).

    Raises:
      ValueError: `path` exists and is not a folder, or cannot be created or written (a
        read-only home, for the default folder): the cache is left as it was.
    """
    if path is None:
        path = default_dir()
        if path is None:
            disable()
            return None
    path = os.path.abspath(os.path.expanduser(os.fspath(path)))
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"compilation cache: {path} exists and is not a folder")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise ValueError(f"compilation cache: cannot create {path} ({e.strerror or e})") from None
    try:  # an existing folder may still be read-only: JAX would then warn at every compile
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check."):
            pass
    except OSError as e:
        raise ValueError(f"compilation cache: cannot write to {path} ({e.strerror or e})") from None
    remove_stale_temporaries(path)  # entries a killed process was writing
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    compilation_cache.reset_cache()
    _install_repairing_cache()
    return path


def disable() -> None:
    """Turns the persistent compilation cache off for this process."""
    jax.config.update("jax_enable_compilation_cache", False)
    compilation_cache.reset_cache()


def current_dir() -> str | None:
    """The folder executables are cached in now, or None if the cache is off."""
    if not jax.config.jax_enable_compilation_cache:
        return None
    return jax.config.jax_compilation_cache_dir


_log = logging.getLogger(__name__)


class _RepairingCache:
    """JAX's file cache (`LRUCache`) with atomic writes and corrupt entries dropped on read.

    JAX decompresses what `get` returns and warns when that fails; checking here first turns a
    torn entry into a miss, and `put` (which JAX's cache skips when a file exists) rewrites it.
    """

    def __init__(self, base):
        self._base = base
        self._dir = Path(base.path)

    def __getattr__(self, name: str):  # what else JAX reads of its cache (reset_cache: _path)
        return getattr(self._base, name)

    def _file(self, key: str) -> Path:
        return self._dir / f"{key}-cache"  # JAX's LRUCache naming (_CACHE_SUFFIX)

    def get(self, key: str) -> bytes | None:
        value = self._base.get(key)
        if value is None:
            return None
        from jax._src import compilation_cache as jax_cache

        try:
            jax_cache.decompress_executable(value)
        except Exception as e:  # zlib.error, zstd's errors: whatever the codec raises
            _log.info("compilation cache: dropping corrupt entry %s (%s)", key, e)
            self._file(key).unlink(missing_ok=True)
            return None
        return value

    def put(self, key: str, value: bytes) -> None:
        if getattr(self._base, "eviction_enabled", False):
            self._base.put(key, value)  # with a size limit JAX's own locking and eviction rule
            return
        path = self._file(key)
        if not path.exists():
            atomic_write(path, value)


def _install_repairing_cache() -> None:
    """Wraps the cache JAX just set up in `_RepairingCache`; JAX's own where its internals
    are not the ones this was written against (jax 0.10-0.11)."""
    try:
        from jax._src import compilation_cache as jax_cache

        jax_cache._initialize_cache()
        base = jax_cache._cache
    except (ImportError, AttributeError):
        return
    if base is not None and hasattr(base, "path") and not isinstance(base, _RepairingCache):
        jax_cache._cache = _RepairingCache(base)
