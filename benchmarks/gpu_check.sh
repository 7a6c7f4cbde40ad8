#!/usr/bin/env bash
# The fused backend on one GPU in one short run: phases cheapest first within a fixed budget.
#
# Usage: benchmarks/gpu_check.sh [--dry-run] [OUT_DIR]
#
#   OUT_DIR    where the two results go (default: $OUT, else ./runs/gpu_check)
#   --dry-run  (or GPU_CHECK_DRY_RUN=1) for a CPU: each phase runs its CPU-side equivalent at tiny
#              sizes (kernels lowered for CUDA in an abstract H200 mesh, Pallas interpret mode),
#              with gymnasium, gymnax, brax and minatar hidden as on the GPU machine: it checks
#              the plumbing, not the GPU
#
# Settings (environment):
#   GPU_CHECK_BUDGET_S=420       seconds for all phases together; the archive comes after
#   GPU_CHECK_PHASES=a,b,...     the phases to run, in that order (default: all, as below)
#   GPU_CHECK_FORCE_TIMEOUT=a,.. these phases sleep, ignoring SIGINT, past a 2 s timeout instead of
#                                running, whatever the budget: shows that a phase killed at its
#                                timeout still gets its status
#   GPU_CHECK_KILL_AFTER_S=10    a phase past its timeout gets SIGINT (pytest and the benchmarks
#                                then write what they have), SIGKILL this much later
#   GPU_CHECK_MIN_PHASE_S=15     a phase that would get less than this is skipped
#   JAX_COMPILATION_CACHE_DIR    JAX's persistent cache, shared by every phase (default: a
#                                temporary folder; every compile is cached, however short)
#   PYTHON=python3
#
# Phases, cheapest first after the smoke, with their caps in seconds. A phase's timeout is its
# cap cut to what is left of the budget less GPU_CHECK_KILL_AFTER_S; a phase stopped at it is
# "timed_out", one with too little left "skipped". Even at their caps the first five end by 390 s;
# where 420 s runs out depends on the compiles (likely within gpu_tests): GPU_CHECK_PHASES picks
# the rest for a second run.
#   environment   30  python, jax, devices, packages -> environment.json; if jax sees no GPU,
#                     every later phase is skipped
#   smoke        180  one small fused kernel per family (CartPole random, Swarm with 16 particles,
#                     MinAtar Breakout), checked against the scan backend and timed -> smoke.json
#   cpu_lowering  60  the CPU suite's CUDA lowering tests under this machine's jax with
#                     JAX_PLATFORMS=cpu: the deviceless lowering CI does -> cpu_lowering.json
#   scaling       45  CartPole rollouts, 2^20 envs, on a mesh of the devices against mesh=None
#   fusion        75  CartPole scan vs fused, random and MLP, N = 2^20, K in {16, 256}
#   minatar       60  Breakout, Freeway, Asterix at 65536 envs: scan loop vs fused kernel
#   gpu_tests    150  `pytest -m gpu tests/jaxsim/fused/test_fused.py` -> gpu_tests.json (4
#                     workers where xdist is installed; jax's deprecation warnings recorded, not
#                     raised)
#   fusion_sizes  90  Swarm-v0 scan vs fused at 1024, 64 and 1 particles, with the traffic model
#   ppo           75  PPO training env-steps/s, CartPole, 4096 envs, scan vs fused rollout
#   throughput    60  `benchmarks run --quick --suite throughput`: the scan backend, every env
# Each phase's console output goes to <phase>.log; pytest phases' JSON is rewritten after every
# test, and the benchmarks' .partial.jsonl keeps their finished points, when a phase is killed.
#
# Results: exactly two files in OUT_DIR, both rewritten after every phase (a run killed midway
# still leaves them):
#   summary.json      the budget and, for every phase: status (ok, failed, timed_out, killed,
#                     skipped, or pending/running while the check runs), seconds, exit code,
#                     timeout, reason and command; written by this script, never by a phase
#   gpu_check.tar.gz  summary.json and every phase's JSON and log. To publish: mkdir
#                     runs/gpu_h200 && tar -xzf OUT_DIR/gpu_check.tar.gz -C runs/gpu_h200 &&
#                     python -m benchmarks report --publish --results runs/gpu_h200
# Needs only what the GPU machine has (python3 with jax, flax, optax, numpy, pytest; no gymnasium,
# gymnax or brax; jaxsim need not be installed: the repository root goes on PYTHONPATH).
# Exit status: 0 if every phase is ok, 1 if not, 2 for bad arguments.
set -uo pipefail

usage() { sed -n '3,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "gpu_check.sh: $*" >&2; exit 2; }

dry_run="${GPU_CHECK_DRY_RUN:-0}"
out=""
for arg in "$@"; do
    case "$arg" in
        --dry-run) dry_run=1 ;;
        -h | --help) usage; exit 0 ;;
        -*) die "unknown option $arg" ;;
        *) out="$arg" ;;
    esac
done
out="${out:-${OUT:-runs/gpu_check}}"
[[ $dry_run == 0 || $dry_run == 1 ]] || die "GPU_CHECK_DRY_RUN must be 0 or 1"

declare -A CAP=(
    [environment]=30 [smoke]=180 [cpu_lowering]=60 [scaling]=45 [fusion]=75 [minatar]=60
    [gpu_tests]=150 [fusion_sizes]=90 [ppo]=75 [throughput]=60
)
ALL_PHASES=(environment smoke cpu_lowering scaling fusion minatar gpu_tests fusion_sizes ppo
    throughput)
budget="${GPU_CHECK_BUDGET_S:-420}"
kill_after="${GPU_CHECK_KILL_AFTER_S:-10}"
min_phase="${GPU_CHECK_MIN_PHASE_S:-15}"
for setting in budget kill_after min_phase; do
    [[ ${!setting} =~ ^[0-9]+$ ]] || die "$setting must be whole seconds, not '${!setting}'"
done
IFS=, read -r -a phases <<<"${GPU_CHECK_PHASES:-$(IFS=,; echo "${ALL_PHASES[*]}")}"
IFS=, read -r -a forced_phases <<<"${GPU_CHECK_FORCE_TIMEOUT:-}"
for name in "${phases[@]}" "${forced_phases[@]}"; do
    [[ -n ${CAP[$name]:-} ]] || die "no phase '$name' (there are: ${ALL_PHASES[*]})"
done

mkdir -p "$out" && out="$(cd "$out" && pwd)" || exit 2
cd "$(dirname "$0")/.." || exit 2
repo="$PWD"
py="${PYTHON:-python3}"
work="$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")" || exit 2
results="$work/results"  # what the archive holds
mkdir -p "$results"
export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-$work/xla_cache}"
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 PYTHONUNBUFFERED=1
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
mode=gpu
if [[ $dry_run == 1 ]]; then
    mode=dry_run
    # sitecustomize there hides the packages the GPU machine lacks.
    export JAX_PLATFORMS=cpu PYTHONPATH="$repo/benchmarks/gpu/gpu_machine_site:$PYTHONPATH"
fi
xdist=()
"$py" -c "import xdist" 2>/dev/null && xdist=(-n 4)

# ------------------------------------------------------------------------------------ the phases
phase_command() {  # NAME LIMIT: sets `cmd` to the phase's command, for a GPU or for the dry run
    local name=$1 limit=$2 r=$results
    local rest=$((limit > 45 ? limit - 45 : 0))  # time to start a step in, leaving one to finish
    local pytest=("$py" -m pytest -q -p no:cacheprovider -p benchmarks.gpu.pytest_progress)
    local lowering=(tests/jaxsim/fused/test_fused.py tests/jaxsim/envs/test_swarm.py
        tests/jaxsim/envs/test_minatar.py tests/jaxsim/envs/test_minatar_si_seaquest.py)
    case "$name:$mode" in
    environment:gpu) cmd=("$py" -m benchmarks.gpu.probe "$r/environment.json" --require-gpu) ;;
    environment:dry_run) cmd=("$py" -m benchmarks.gpu.probe "$r/environment.json") ;;
    smoke:gpu) cmd=("$py" -m benchmarks.gpu.smoke --out "$r/smoke.json" --budget-s "$rest") ;;
    smoke:dry_run) cmd=("$py" -m benchmarks.gpu.smoke --dry-run --out "$r/smoke.json") ;;
    cpu_lowering:*)
        cmd=(env JAX_PLATFORMS=cpu "${pytest[@]}" "${lowering[@]}" -k lowers_for
            --tests-json "$r/cpu_lowering.json")
        [[ $mode == gpu ]] && cmd+=("${xdist[@]}") ;;
    scaling:gpu)  # a parent and a child process share the GPU: neither may take 75% of it
        cmd=(env XLA_PYTHON_CLIENT_PREALLOCATE=false "$py" -m benchmarks.scaling.measure --quick
            --backends "scan,fused" --steps 64 --num-envs 1048576 --out "$r/scaling.json") ;;
    scaling:dry_run)
        cmd=("$py" -m benchmarks.scaling.measure --quick --backends "scan,fused" --devices 1 --steps 4
            --num-envs 64 --min-time 0 --out "$r/scaling.json") ;;
    fusion:gpu)
        cmd=("$py" -m benchmarks.fusion.measure --quick --envs CartPole-v1 --policies "random,mlp"
            --outputs rewards --num-envs 1048576 --k "16,256" --budget-s "$((limit * 2 / 3))"
            --out "$r/fusion.json") ;;
    fusion:dry_run)
        cmd=("$py" -m benchmarks.fusion.measure --quick --envs CartPole-v1 --policies random
            --outputs rewards --num-envs 64 --k 4 --steps 8 --min-time 0 --out "$r/fusion.json") ;;
    minatar:gpu)
        cmd=("$py" -m benchmarks.minatar.measure --impls fused --games "Breakout,Freeway,Asterix"
            --num-envs 65536 --steps 32 --repeats 3 --out "$r/minatar.json") ;;
    minatar:dry_run)
        cmd=("$py" -m benchmarks.minatar.measure --impls fused --games Breakout --num-envs 16 --steps 4
            --repeats 3 --out "$r/minatar.json") ;;
    gpu_tests:gpu)
        # The run is for the kernels: jax 0.11's deprecations (its Triton lowering's among them)
        # are recorded in gpu_tests.json, not raised; cpu_lowering keeps the suite's strictness.
        cmd=(env XLA_PYTHON_CLIENT_PREALLOCATE=false "${pytest[@]}" "${xdist[@]}"
            tests/jaxsim/fused/test_fused.py -m gpu -W default::DeprecationWarning
            --tests-json "$r/gpu_tests.json") ;;
    gpu_tests:dry_run)  # the GPU class's interpreted twin, one case
        cmd=("${pytest[@]}" tests/jaxsim/fused/test_fused.py
            -k "TestFused and not GPU and same_trajectory and CartPole and random"
            --tests-json "$r/gpu_tests.json") ;;
    fusion_sizes:gpu)
        cmd=("$py" -m benchmarks.fusion_sizes.measure --sizes "1024,64,1" --outputs rewards
            --budget-s "$((limit * 2 / 3))" --out "$r/fusion_sizes.json") ;;
    fusion_sizes:dry_run)
        cmd=("$py" -m benchmarks.fusion_sizes.measure --sizes 16 --outputs rewards --num-envs 64
            --steps 8 --k 4 --min-time 0 --no-minatar --out "$r/fusion_sizes.json") ;;
    ppo:gpu)
        cmd=("$py" -m benchmarks.ppo.measure --envs CartPole-v1 --quick --no-sb3 --gpu-sps
            --out "$r/ppo.json") ;;
    ppo:dry_run)
        cmd=("$py" -m benchmarks.ppo.measure --envs CartPole-v1 --quick --no-sb3 --gpu-sps
            --total-steps 512 --out "$r/ppo.json") ;;
    throughput:*)
        local size=--quick
        [[ $mode == dry_run ]] && size=--smoke
        cmd=("$py" -m benchmarks run "$size" --suite throughput --baselines none
            --timeout-s "$((limit > 10 ? limit - 10 : 1))" --no-report --out "$r/throughput") ;;
    esac
}

# ------------------------------------------------------------------------------- the bookkeeping
now_ms() {
    if [[ -n ${EPOCHREALTIME:-} ]]; then
        local us=${EPOCHREALTIME//[!0-9]/}
        echo $((10#$us / 1000))
    else
        date +%s%3N
    fi
}
seconds() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }  # MS -> "12.345"
json_str() {  # TEXT -> a JSON string, or null for ""
    local s=$1
    [[ -z $s ]] && { printf null; return; }
    s=${s//\\/\\\\}; s=${s//\"/\\\"}; s=${s//$'\n'/\\n}; s=${s//$'\r'/\\r}; s=${s//$'\t'/\\t}
    printf '"%s"' "$s"
}

t_start=$(now_ms)
started_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)
declare -a P_STATUS P_SECS P_RC P_LIMIT P_REASON P_CMD  # per phase
for i in "${!phases[@]}"; do P_STATUS[i]=pending; done
overall=running
current=-1   # the running phase's index
phase_start=$t_start

write_summary() {
    local i sep=""
    {
        printf '{\n  "check": "benchmarks/gpu_check.sh",\n  "mode": "%s",\n' "$mode"
        printf '  "status": "%s",\n  "budget_s": %d,\n' "$overall" "$budget"
        printf '  "wall_s": %s,\n  "started_utc": "%s",\n' \
            "$(seconds $(($(now_ms) - t_start)))" "$started_utc"
        printf '  "compilation_cache": %s,\n' "$(json_str "$JAX_COMPILATION_CACHE_DIR")"
        printf '  "archive": "gpu_check.tar.gz",\n  "phases": ['
        for i in "${!phases[@]}"; do
            printf '%s\n    {"phase": "%s", "status": "%s", "seconds": %s, "exit_code": %s, ' \
                "$sep" "${phases[i]}" "${P_STATUS[i]}" "${P_SECS[i]:-null}" "${P_RC[i]:-null}"
            printf '"timeout_s": %s, "reason": %s, "command": %s}' "${P_LIMIT[i]:-null}" \
                "$(json_str "${P_REASON[i]:-}")" "$(json_str "${P_CMD[i]:-}")"
            sep=,
        done
        printf '\n  ]\n}\n'
    } >"$out/summary.json.tmp" && mv -f "$out/summary.json.tmp" "$out/summary.json"
    cp "$out/summary.json" "$results/summary.json"
}

write_archive() {
    tar -czf "$out/gpu_check.tar.gz.tmp" -C "$results" . &&
        mv -f "$out/gpu_check.tar.gz.tmp" "$out/gpu_check.tar.gz"
}

finish() {  # OVERALL: the final summary and archive
    overall=$1
    write_summary
    write_archive || echo "gpu_check.sh: could not write the archive" >&2
    echo
    echo "phase          status     seconds  timeout  reason"
    for i in "${!phases[@]}"; do
        printf '%-14s %-10s %7s %8s  %s\n' "${phases[i]}" "${P_STATUS[i]}" "${P_SECS[i]:--}" \
            "${P_LIMIT[i]:--}" "${P_REASON[i]:-}"
    done
    echo "$overall in $(seconds $(($(now_ms) - t_start))) s of a ${budget} s budget ($mode);" \
        "wrote $out/summary.json and $out/gpu_check.tar.gz"
}

# shellcheck disable=SC2329  # called by the traps below
on_signal() {  # SIGNAL: stop the running phase, record it as killed, finish
    trap - INT TERM HUP
    local pid
    for pid in $(jobs -p); do  # the running phase's `timeout`, which leads its process group
        kill -TERM "$pid" 2>/dev/null  # timeout passes it on to the phase
        for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -KILL -- "-$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    if ((current >= 0)) && [[ ${P_STATUS[current]} == running ]]; then
        P_STATUS[current]=killed
        P_SECS[current]=$(seconds $(($(now_ms) - phase_start)))
        P_REASON[current]="the check got SIG$1 while this phase ran"
    fi
    for i in "${!phases[@]}"; do
        [[ ${P_STATUS[i]} == pending ]] || continue
        P_STATUS[i]=skipped P_REASON[i]="the check got SIG$1 first"
    done
    finish interrupted
    exit 1
}
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM
trap 'on_signal HUP' HUP
trap 'rm -rf "$work"' EXIT

skip_rest=""  # set when a phase's outcome makes the later ones pointless

run_phase() {  # INDEX
    local i=$1 name=${phases[$1]} cmd=() forced=0
    local left=$((budget - ($(now_ms) - t_start) / 1000)) cap=${CAP[${phases[$1]}]}
    [[ ",${GPU_CHECK_FORCE_TIMEOUT:-}," == *",$name,"* ]] && forced=1
    if [[ -n $skip_rest ]]; then
        P_STATUS[i]=skipped P_REASON[i]=$skip_rest
        return
    fi
    if ((!forced && (left - kill_after < min_phase || left - kill_after < 1))); then
        P_STATUS[i]=skipped P_REASON[i]="budget spent: ${left} s of ${budget} s left"
        return
    fi
    local limit=$((left - kill_after < cap ? left - kill_after : cap))
    if ((forced)); then  # whatever the budget: it takes 2 s and GPU_CHECK_KILL_AFTER_S
        limit=2
        cmd=(bash -c "trap '' INT; exec sleep $((limit + kill_after + 60))")
    else
        phase_command "$name" "$limit"
    fi
    P_LIMIT[i]=$limit P_CMD[i]=$(printf '%q ' "${cmd[@]}") P_STATUS[i]=running current=$i
    P_CMD[i]=${P_CMD[i]% }
    phase_start=$(now_ms)
    write_summary
    echo "== $name (timeout ${limit} s, ${left} s of the budget left): ${P_CMD[i]}"
    timeout -s INT -k "$kill_after" "$limit" "${cmd[@]}" >"$results/$name.log" 2>&1 &
    wait "$!"
    local rc=$?
    local ms=$(($(now_ms) - phase_start))
    P_SECS[i]=$(seconds "$ms") P_RC[i]=$rc
    if ((rc == 0)); then
        P_STATUS[i]=ok
    elif ((rc == 124 || (rc == 137 && ms >= limit * 1000))); then
        P_STATUS[i]=timed_out P_REASON[i]="stopped at its ${limit} s timeout"
    else
        P_STATUS[i]=failed P_REASON[i]="exit code $rc"
        if [[ $name == environment && $rc == 3 ]]; then
            skip_rest="jax sees no GPU (see environment.json)"
            P_REASON[i]=$skip_rest
        fi
    fi
    tail -n 6 "$results/$name.log" | sed 's/^/    /'
    echo "   -> ${P_STATUS[i]} in ${P_SECS[i]} s"
    write_summary
    write_archive
}

echo "gpu_check.sh: ${#phases[@]} phases in ${budget} s ($mode); results -> $out"
for i in "${!phases[@]}"; do
    run_phase "$i"
done
status=0
for i in "${!phases[@]}"; do [[ ${P_STATUS[i]} == ok ]] || status=1; done
finish "$([[ $status == 0 ]] && echo ok || echo failed)"
exit "$status"
