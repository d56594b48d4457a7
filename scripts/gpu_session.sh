#!/usr/bin/env bash
# One call on the GPU machine (after `source .gpu/env.sh && source .gpu/tests.sh`): the GPU
# benchmark (bench/gpu_models.py, capped at GPU_BENCH_S seconds; it rewrites its JSON after every
# cell, so a cut-off run keeps what it measured), then the whole suite with every part at once
# (scripts/gpu_suite.sh, parts capped at GPU_SUITE_LIMIT seconds). Everything lands in $OUT as
# at most 7 files: gpu_models.{json,md,png,log}, gpu_suite.md, gpu_suite_logs.tgz, session.txt.
#   scripts/gpu_session.sh [bench args...]
set -uo pipefail
out="${OUT:-$PWD/gpu-out}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
bench_args=("$@")
[ ${#bench_args[@]} -eq 0 ] && bench_args=(--sizes 1024 4096 8192 --repeats 3 --max-cell-s 1.5
                                           --overhead-runs 10)
timeout "${GPU_BENCH_S:-60}" python3 bench/gpu_models.py "${bench_args[@]}" --out "$out" \
  > "$out/gpu_models.log" 2>&1
echo "bench rc=$? seconds=$(( $(date +%s) - t0 )) args: ${bench_args[*]}" | tee "$out/session.txt"
tail -n 40 "$out/gpu_models.log"
GPU_SUITE_PARALLEL=1 GPU_SUITE_LIMIT="${GPU_SUITE_LIMIT:-100}" GPU_SUITE_LOGS=/tmp/gpu-suite-logs \
  bash scripts/gpu_suite.sh ${GPU_SUITE_PARTS:-}
echo "session seconds=$(( $(date +%s) - t0 ))" | tee -a "$out/session.txt"
