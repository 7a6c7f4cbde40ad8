"""JAX's persistent compilation cache, on by default in jaxsim's commands: compile once a machine.

XLA's compile of a training loop takes seconds on a CPU; the cache stores every executable on
disk, keyed by its program, options and jax version, so a later process that builds the same
program loads it instead (milliseconds). Programs with host callbacks (`jax.debug.callback`)
are never cached by JAX, which is why `agents.train` reports progress between jitted chunks.

    from jaxsim import compile_cache
    compile_cache.enable()                  # ~/.cache/jaxsim/xla, or $JAXSIM_COMPILATION_CACHE
    compile_cache.enable("/tmp/my-cache")   # another folder
    compile_cache.disable()
"""

from __future__ import annotations

import os

import jax
from jax.experimental.compilation_cache import compilation_cache

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
      ValueError: `path` exists and is not a folder, or cannot be created.
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
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    compilation_cache.reset_cache()
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
