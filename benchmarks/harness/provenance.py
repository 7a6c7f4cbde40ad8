"""Where, when and with what a result was produced: provenance and the machine tag."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jax

from benchmarks.harness.commands import portable_command
from benchmarks.harness.paths import REPO_ROOT

# Environment variables that change what a benchmark measures; recorded when set.
_PERF_ENV_VARS = (
    "XLA_FLAGS",
    "JAX_PLATFORMS",
    "JAX_PLATFORM_NAME",
    "JAX_ENABLE_X64",
    "JAX_DEFAULT_PRNG_IMPL",
    "JAX_COMPILATION_CACHE_DIR",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES",
    # XLA:CPU sizes its intra-op pool from it (`jaxsim.cpu_threads`): with one thread no fusion
    # is split across cores, which halves a 4096-env CartPole rollout's time on a loaded 2-core
    # machine (docs/upstream_xla_cpu_two_core.md).
    "NPROC",
)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    for key in ("model name", "Hardware", "Processor", "cpu model"):
        for line in text.splitlines():
            name, _, value = line.partition(":")
            if name.strip() == key and value.strip():
                return value.strip()
    return platform.processor() or platform.machine()


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout


def git_commit() -> str:
    """HEAD's hash, plus "-dirty" if any file is modified or untracked; "unknown" without git."""
    head = _git("rev-parse", "HEAD")
    if not head:
        return "unknown"
    status = _git("status", "--porcelain")
    return head.strip() + ("-dirty" if status is None or status.strip() else "")


def command_line() -> str:
    """The command that started this process, as a shell would take it back, relative to the
    repository and naming no machine's paths (`commands.portable_command`)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name and spec.name != "__main__":
        # `python -m pkg.mod`: sys.argv[0] is the file's path, not what was typed.
        module = spec.name.removesuffix(".__main__")
        return portable_command(["python", "-m", module, *sys.argv[1:]])
    return portable_command(["python", *sys.argv])


def provenance(packages: Iterable[str] = ()) -> dict[str, Any]:
    """Where, when and with what a result was produced.

    Args:
      packages: distribution names of the baselines measured (e.g. "gymnasium", "gymnax"); each
        gets its installed version, or None if it is not installed.

    Returns:
      A JSON-serialisable dict: time, machine, software versions, device, commit and command.
    """
    devices = jax.devices()
    try:
        available_cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        available_cores = os.cpu_count()
    try:
        loadavg = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        loadavg = None
    return {
        "utc_time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_count_available": available_cores,
        "loadavg_1_5_15min": loadavg,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {
            name: _version(name) for name in ("jax", "jaxlib", "flax", "numpy", *packages)
        },
        "jax_backend": jax.default_backend(),
        "device_kind": devices[0].device_kind,
        "num_devices": len(devices),
        "commit": git_commit(),
        "command": command_line(),
        "env_vars": {k: os.environ[k] for k in _PERF_ENV_VARS if k in os.environ},
    }


def machine_tag() -> str:
    """A file-name-safe tag naming the device and host, e.g. "cpu2_myhost" or "gpu-h200_myhost".

    Results from different machines (a GPU run versus a 2-core CPU run) never share a name.
    """
    device = jax.devices()[0]
    if device.platform == "cpu":
        kind = f"cpu{os.cpu_count()}"
    else:
        kind = f"{device.platform}-{device.device_kind}"
    return _slug(kind) + "_" + _slug(socket.gethostname())


def _slug(text: str) -> str:
    chars = [c.lower() if c.isalnum() else "-" for c in text]
    return "-".join(part for part in "".join(chars).split("-") if part) or "unknown"
