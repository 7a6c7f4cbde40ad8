#!/usr/bin/env bash
# The fused backend on a GPU: the `gpu`-marked tests, then a sized-down fusion benchmark.
#
# Usage: benchmarks/gpu_check.sh OUT_DIR
#
# Needs only what the GPU machine has (python3 with jax, flax, optax, numpy; no gymnasium, and
# jaxsim need not be installed: the repository root goes on PYTHONPATH). Runs in under 12 minutes
# (170 + 150 + 90 + 70 + 90 + 50 + 75 s of hard timeouts; start-up comes on top):
# each phase has a hard timeout. Writes into OUT_DIR:
#   environment.json  python, jax and device
#   gpu_tests.json    per-test outcome of `pytest -m gpu tests/jaxsim/fused/test_fused.py` (from JUnit XML);
#                     without pytest, {"status": "skipped"} and checks.json stands in for it
#   checks.json       fused vs scan at a small ragged size: every environment x random, MLP and
#                     open-loop policies (`benchmarks.fusion --check-only`), run when pytest is absent
#   fusion.json       `benchmarks.fusion --quick`: CartPole, N in {2^14, 2^20}, K in {1, 16, 256}
#   throughput/       `benchmarks run --quick --suite throughput --baselines none`: the scan
#                     backend on every environment, as on the CPU (the report marks the device)
#   ppo.json          `benchmarks.ppo --gpu-sps`: PPO training env-steps/s, CartPole, 4096 envs,
#                     scan vs fused rollout phase
#   fusion_sizes.json `benchmarks.fusion_sizes`: Swarm-v0 scan vs fused as the state grows
#                     (N = 1024 first, then 256, 16, 1), with the traffic model; .png beside it
#   scaling.json      `benchmarks.scaling`: CartPole rollouts with the batch (2^20 envs) split over
#                     a mesh of 1..all devices against mesh=None, scan and fused backends (the
#                     fused one runs its kernel per shard under shard_map)
#   minatar.json      `benchmarks.minatar --impls fused`: Breakout, Freeway, Asterix at 65536 envs,
#                     observations kept, scan loop and fused kernel timed in turn; read it
#                     against the MinAtar rows of fusion_sizes.json's traffic model
#   *.log             the console output of each phase
# Suggested OUT_DIR: runs/gpu_<device>/; `python -m benchmarks report --publish --results
# runs/gpu_<device>` publishes it as benchmarks/results/gpu_<device>/, where the report finds it.
# Exit status: 0 if every phase passed, 1 otherwise (the JSON files say which).
set -uo pipefail

out="${1:?usage: benchmarks/gpu_check.sh OUT_DIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
py="${PYTHON:-python3}"
status=0

"$py" - "$out/environment.json" <<'EOF' || status=1
import json, platform, sys
import jax
devices = jax.devices()
info = {
    "python": platform.python_version(),
    "jax": jax.__version__,
    "backend": jax.default_backend(),
    "devices": [d.device_kind for d in devices],
}
json.dump(info, open(sys.argv[1], "w"), indent=2)
print(info)
EOF

# 1. The gpu-marked tests (Triton-compiled kernel against the scan backend). Deprecation
# warnings are not errors here: jax 0.11 deprecates the Triton lowering this kernel asks for.
if "$py" -c "import pytest" 2>/dev/null; then
    timeout 170 "$py" -m pytest tests/jaxsim/fused/test_fused.py -m gpu -q -p no:cacheprovider \
        -W "ignore::DeprecationWarning" --junitxml="$out/gpu_tests.xml" 2>&1 \
        | tee "$out/gpu_tests.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    "$py" - "$out/gpu_tests.xml" "$out/gpu_tests.json" <<'EOF' || status=1
import json, sys
import xml.etree.ElementTree as ET
cases = []
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    outcome, message = "passed", None
    for child in case:
        if child.tag in ("failure", "error", "skipped"):
            outcome = {"failure": "failed"}.get(child.tag, child.tag)
            message = (child.get("message") or "")[:2000]
            if child.tag == "skipped" and "xfail" in (child.get("type") or "") + (message or ""):
                outcome = "xfailed"
    cases.append({"test": f"{case.get('classname')}::{case.get('name')}", "outcome": outcome,
                  "seconds": float(case.get("time", 0)), "message": message})
counts = {}
for c in cases:
    counts[c["outcome"]] = counts.get(c["outcome"], 0) + 1
json.dump({"status": "ran", "counts": counts, "tests": cases}, open(sys.argv[2], "w"), indent=2)
print(counts)
EOF
else
    echo '{"status": "skipped", "reason": "pytest is not installed; see checks.json"}' \
        > "$out/gpu_tests.json"
    # 1'. Without pytest, the same equivalence through the benchmark's own check.
    timeout 150 "$py" -m benchmarks.fusion --check-only --out "$out/checks.json" 2>&1 \
        | tee "$out/checks.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi

# 2. The sized-down benchmark: it starts no new point after --budget-s seconds.
timeout 150 "$py" -m benchmarks.fusion --quick --budget-s 90 --out "$out/fusion.json" 2>&1 \
    | tee "$out/fusion.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

# 3. Rollout throughput of every environment on the GPU (jaxsim only: no CPU baselines there).
timeout 90 "$py" -m benchmarks run --quick --suite throughput --baselines none \
    --timeout-s 80 --no-report --out "$out/throughput" 2>&1 | tee "$out/throughput.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

# 4. PPO training throughput with 4096 environments, scan vs fused rollout phase.
timeout 70 "$py" -m benchmarks.ppo --envs CartPole-v1 --quick --no-sb3 --gpu-sps \
    --out "$out/ppo.json" 2>&1 | tee "$out/ppo.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

# 5. Fusion against simulator size: the largest swarm first, so it is measured within budget.
timeout 90 "$py" -m benchmarks.fusion_sizes --sizes 1024,256,16,1 --budget-s 55 \
    --out "$out/fusion_sizes.json" 2>&1 | tee "$out/fusion_sizes.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

# 6. Rollouts on a mesh of the machine's devices (one H200: the mesh path's cost against
# mesh=None). --steps 64 equals the check's length, so the check's compile is reused.
timeout 50 "$py" -m benchmarks.scaling --quick --backends scan,fused --steps 64 \
    --num-envs 1048576 --out "$out/scaling.json" 2>&1 | tee "$out/scaling.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

# 7. MinAtar natively (issue 21): three games' scan loop beside the fused kernel, both
# keeping observations; no gymnax or original here (the CPU's minatar suite has them).
timeout 75 "$py" -m benchmarks.minatar --impls fused --games Breakout,Freeway,Asterix \
    --num-envs 65536 --steps 32 --repeats 3 \
    --out "$out/minatar.json" 2>&1 | tee "$out/minatar.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

exit "$status"
