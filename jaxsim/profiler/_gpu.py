"""NVML's "GPU utilization" sampled while a callable runs, to compare with kernel-busy time."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable


def _nvml_index() -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(visible) if visible.isdigit() else 0


def _sample_pynvml(stop: threading.Event, samples: list[float], interval_s: float, index: int):
    import pynvml

    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        while not stop.is_set():
            samples.append(float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu))
            stop.wait(interval_s)
    finally:
        pynvml.nvmlShutdown()


def _sample_smi(stop: threading.Event, samples: list[float], interval_s: float, index: int):
    cmd = [
        "nvidia-smi",
        f"--id={index}",
        "--query-gpu=utilization.gpu",
        "--format=csv,noheader,nounits",
        f"--loop-ms={max(int(interval_s * 1000), 10)}",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        threading.Thread(target=lambda: (stop.wait(), proc.terminate()), daemon=True).start()
        for line in proc.stdout:
            if line.strip().isdigit():
                samples.append(float(line.strip()))
    finally:
        proc.kill()
        proc.wait()


def utilization_source() -> tuple[str | None, str]:
    """("pynvml" | "nvidia-smi" | None, why not)."""
    import jax

    if jax.default_backend() != "gpu":
        return None, f"skipped: jax runs on {jax.default_backend()}; NVML needs an NVIDIA GPU"
    try:
        import pynvml  # noqa: F401

        return "pynvml", ""
    except ImportError:
        pass
    if shutil.which("nvidia-smi"):
        return "nvidia-smi", ""
    return None, "skipped: neither pynvml (pip install nvidia-ml-py) nor nvidia-smi is available"


class Sampler:
    """Samples NVML's utilization.gpu on a thread between `start()` and `stop()`."""

    def __init__(self, interval_s: float = 0.02):
        self.interval_s = interval_s
        self.source, self.why = utilization_source()
        self._samples: list[float] = []
        self._errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def start(self) -> Sampler:
        if self.source is None:
            return self
        sampler = _sample_pynvml if self.source == "pynvml" else _sample_smi

        def target():
            try:
                sampler(self._stop, self._samples, self.interval_s, _nvml_index())
            except BaseException as e:  # reported, never raised into the profile
                self._errors.append(e)

        self._thread = threading.Thread(target=target, daemon=True)
        self._t0 = time.perf_counter()
        self._thread.start()
        return self

    def stop(self, **extra) -> dict:
        """{"nvml_utilization": mean 0-1, "samples", "seconds", "source", **extra} or
        {"skipped": why}."""
        if self.source is None:
            return {"skipped": self.why}
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._errors or not self._samples:
            reason = repr(self._errors[0]) if self._errors else "no samples"
            return {"skipped": f"skipped: {self.source} gave no utilization ({reason})"}
        return {
            "source": self.source,
            "nvml_utilization": sum(self._samples) / len(self._samples) / 100.0,
            "samples": len(self._samples),
            "seconds": time.perf_counter() - self._t0,
            **extra,
        }


def measure(
    run_once: Callable[[], None], min_seconds: float = 2.0, interval_s: float = 0.02
) -> dict:
    """Mean NVML utilization.gpu (0-1) while `run_once` repeats for at least `min_seconds`.

    NVML reports the fraction of its last sample period (1/6 s to 1 s) in which any kernel ran,
    so a GPU that runs one tiny kernel per period reads 100%.
    """
    sampler = Sampler(interval_s)
    if sampler.source is None:
        return {"skipped": sampler.why}
    sampler.start()
    t0, runs = time.perf_counter(), 0
    try:
        while time.perf_counter() - t0 < min_seconds or runs == 0:
            run_once()
            runs += 1
    finally:
        result = sampler.stop(runs=runs)
    return result
