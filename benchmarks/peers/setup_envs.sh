#!/usr/bin/env bash
# Makes the peers suite's own virtual environments, one per peer, in .peer_envs/ (git ignores it).
#
# Each peer pins what jaxsim cannot (an older jax for brax's trainers, an older gymnax for rejax,
# torch for SBX), so none is installed into jaxsim's environment and jaxsim's pins never move.
# Usage: bash benchmarks/peers/setup_envs.sh [brax|rejax|sbx ...]   (default: all three)
# Environment: PEER_ENVS (default <repository>/.peer_envs), PYTHON (default python3.11 or python3),
# TORCH_FIND_LINKS (a folder holding the CPU torch wheel, default /opt/wheels if it exists).
set -euo pipefail

root="${PEER_ENVS:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.peer_envs}"
python="${PYTHON:-$(command -v python3.11 || command -v python3)}"
links=()
if [[ -d "${TORCH_FIND_LINKS:-/opt/wheels}" ]]; then links=(--find-links "${TORCH_FIND_LINKS:-/opt/wheels}"); fi

make_env() {  # name, then the pip requirements
  local name="$1"; shift
  echo "== $name -> $root/$name"
  "$python" -m venv "$root/$name"
  "$root/$name/bin/pip" install -q --upgrade pip
  "$root/$name/bin/pip" install -q "${links[@]}" "$@"
  "$root/$name/bin/python" -c "import jax; print('$name: jax', jax.__version__)"
}

want=("${@:-brax rejax sbx}")
for name in ${want[@]}; do
  case "$name" in
    # brax 0.14's trainers call jax.device_put_replicated (deprecated in jax 0.8.1, gone by 0.10).
    brax) make_env brax "brax==0.14.2" "jax<0.10" "jaxlib<0.10" ;;
    # rejax 0.1.3 needs gymnax >= 0.0.9 and its evaluation unpacks a 5-value step: gymnax 0.0.9.
    rejax) make_env rejax "rejax==0.1.3" "gymnax==0.0.9" ;;
    # SBX needs stable-baselines3, hence torch: the CPU build, never the CUDA one.
    sbx) make_env sbx "torch==2.13.0" "sbx-rl" "gymnasium" ;;
    *) echo "unknown peer '$name': expected brax, rejax or sbx" >&2; exit 2 ;;
  esac
done
