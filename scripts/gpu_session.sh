#!/usr/bin/env bash
# One call on the GPU machine (after `source .gpu/env.sh && source .gpu/tests.sh`): the GPU
# benchmark (bench/gpu_models.py, capped at GPU_BENCH_S seconds, default 240; it rewrites its JSON
# after every cell, so a cut-off run keeps what it measured), then the whole suite with every part
# at once (scripts/gpu_suite.sh, parts capped at GPU_SUITE_LIMIT seconds, default 300). Everything
# lands in $OUT as at most 7 files: gpu_models.{json,md,png,log}, gpu_suite.md, gpu_suite_logs.tgz,
# session.txt. The default benchmark grid is the one that fits a 10-minute call next to the suite
# (AttentionVJP S 1024 and 4096, 5 timed runs a cell); GPU_BENCH_FULL=1 runs bench/gpu_models.py's
# own defaults (S 1024-8192, 10 runs a cell; about as long as the suite, so give it a call of its
# own: GPU_SUITE_PARTS=none skips the suite).
#   scripts/gpu_session.sh [bench args...]
set -uo pipefail
out="${OUT:-$PWD/gpu-out}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
bench_args=("$@")
if [ ${#bench_args[@]} -eq 0 ] && [ "${GPU_BENCH_FULL:-0}" != 1 ]; then
  bench_args=(--sizes 1024 4096 --repeats 5 --max-cell-s 1.5 --overhead-runs 10)
fi
timeout "${GPU_BENCH_S:-240}" python3 bench/gpu_models.py "${bench_args[@]}" --out "$out" \
  > "$out/gpu_models.log" 2>&1
echo "bench rc=$? seconds=$(( $(date +%s) - t0 )) args: ${bench_args[*]:-(defaults)}" | tee "$out/session.txt"
tail -n 40 "$out/gpu_models.log"
if [ "${GPU_SUITE_PARTS:-}" != none ]; then
  GPU_SUITE_PARALLEL=1 GPU_SUITE_LIMIT="${GPU_SUITE_LIMIT:-300}" GPU_SUITE_LOGS=/tmp/gpu-suite-logs \
    bash scripts/gpu_suite.sh ${GPU_SUITE_PARTS:-}
fi
echo "session seconds=$(( $(date +%s) - t0 ))" | tee -a "$out/session.txt"
