"""The Python side of benchmarks/gpu_check.sh: CUDA lowering from a CPU, the probe, the smoke."""
