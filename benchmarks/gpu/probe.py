"""The GPU check's first look at the machine: python, jax, devices and packages, as JSON.

Usage: python -m benchmarks.gpu.probe OUT.json [--require-gpu]

Exit status 3 with --require-gpu when jax sees no GPU: the later phases would then measure a CPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

import jax

from atomicfiles import finite_json, write_json_atomic
from benchmarks.harness.provenance import provenance

NO_GPU = 3
# What the check needs there, and what the GPU machine is known to lack (their absence is fine:
# no phase imports them).
PACKAGES = ("jaxlib", "triton", "flax", "optax", "chex", "pytest", "pytest-xdist", "matplotlib")
EXTRAS = ("gymnasium", "gymnax", "brax", "minatar")


def nvidia_smi() -> str | None:
    query = "--query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm"
    try:
        out = subprocess.run(
            ["nvidia-smi", query, "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu.probe")
    p.add_argument("out", type=Path)
    p.add_argument("--require-gpu", action="store_true", help=f"exit {NO_GPU} if jax sees none")
    args = p.parse_args(argv)
    devices = jax.devices()
    info = {
        "python": sys.version.split()[0],
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [d.device_kind for d in devices],
        "extras_importable": {m: importlib.util.find_spec(m) is not None for m in EXTRAS},
        "nvidia_smi": nvidia_smi(),
        "provenance": provenance(PACKAGES),
    }
    write_json_atomic(args.out, finite_json(info))
    print({k: info[k] for k in ("python", "jax", "backend", "devices", "extras_importable")})
    if args.require_gpu and info["backend"] != "gpu":
        print(f"jax sees no GPU (backend {info['backend']}): nothing to check", file=sys.stderr)
        return NO_GPU
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
