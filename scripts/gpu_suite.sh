#!/usr/bin/env bash
# The whole test suite on the GPU machine (make test-cuda), after `source .gpu/env.sh` (see
# scripts/gpu_pack.sh and PLAYBOOK "The GPU"). Each part runs in its own process so that a crash
# is recorded, not fatal; logs and JUnit XML go to GPU_SUITE_LOGS (default $OUT/logs, $OUT being
# ./gpu-out when unset), packed into $OUT/gpu_suite_logs.tgz; the table ($OUT/gpu_suite.md) last.
#   scripts/gpu_suite.sh [part ...]     parts: probe cpp ops contracts engine plugin external corpus
#                                       docs demo precision fuzz (default: all; fuzz with 3000 cases);
#                                       ops1 and ops2 are the two halves of ops (one call each);
#                                       list: the test ids in the file GPU_SUITE_LIST, one a line
#                                       (e.g. the tests a part cut off by its time limit did not reach)
#   GPU_SUITE_PARALLEL=1                all parts at once (16-core machine: the suite then takes as
#                                       long as its longest part); the log archive is refreshed every
#                                       10 s so that a run cut off by its time limit still reports.
#   GPU_SUITE_N_<part>=N                xdist workers for that part (e.g. GPU_SUITE_N_external=12)
set -uo pipefail
out="${OUT:-$PWD/gpu-out}"
logs="${GPU_SUITE_LOGS:-$out/logs}"
mkdir -p "$out" "$logs"
py=${PYTHON:-python3}
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(probe cpp ops contracts engine plugin external corpus docs demo precision fuzz)
export PYTHONUNBUFFERED=1 ORT_LOGGING_LEVEL=3
workers=${GPU_SUITE_WORKERS:-6}
start=$(date +%s)
{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
  $py -c 'import sys, onnxruntime, numpy, onnx; print("python", sys.version.split()[0], "onnxruntime", onnxruntime.__version__, "numpy", numpy.__version__, "onnx", onnx.__version__)'
  echo "MLX: $(basename "$(readlink -f "${ORTMLX_LIBRARY%/*}/mlx/lib/libmlx.so" 2>/dev/null || echo libmlx.so)") mlx-cuda-13 0.32.4 (sm_90 SASS); MLX_ENABLE_TF32=${MLX_ENABLE_TF32:-unset} ONNXRUNTIME_EP_MLX_TF32=${ONNXRUNTIME_EP_MLX_TF32:-unset}"
} > "$logs/env.txt" 2>&1
cat "$logs/env.txt"
snapshot() {  # the logs as one archive under $out (few files come back from the device machine)
  (cd "$logs" && tar -czf "$out/.logs.tgz" . 2>/dev/null && mv -f "$out/.logs.tgz" "$out/gpu_suite_logs.tgz")
}
run_part() {  # name, timeout seconds (capped by GPU_SUITE_LIMIT), command...
  local name=$1 limit=$2; shift 2
  [ -n "${GPU_SUITE_LIMIT:-}" ] && [ "$GPU_SUITE_LIMIT" -lt "$limit" ] && limit=$GPU_SUITE_LIMIT
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc seconds=$(( $(date +%s) - t0 ))" >> "$logs/parts.txt"
  echo "== $name: rc=$rc ($(( $(date +%s) - t0 )) s)"; tail -n 3 "$logs/$name.log"
}
pytest_part() {  # name, timeout, paths...
  local name=$1 limit=$2; shift 2
  local n=$workers
  if [ "${GPU_SUITE_PARALLEL:-0}" = 1 ]; then  # about 16 cores shared by every part
    if [ ${#parts[@]} -le 2 ]; then  # the second wave (ops corpus): the cores are theirs
      case $name in ops|ops1|ops2) n=12 ;; *) n=4 ;; esac
    else
      case $name in ops|ops1|ops2) n=8 ;; external|list) n=6 ;; contracts) n=4 ;; engine|plugin|corpus) n=2 ;; *) n=1 ;; esac
    fi
  fi
  # GPU_SUITE_N_<part>=N overrides the worker count of one part (a call that runs few parts).
  local override="GPU_SUITE_N_$name"
  [ -n "${!override:-}" ] && n=${!override}
  # The fuzz part runs in one process: its counts are printed by the controller.
  local xdist=(-n "$n")
  [ "$name" = fuzz ] && xdist=()
  # The ids first (a few seconds), so that the report can list what a cut-off part did not reach.
  [ "$name" = fuzz ] || $py -m pytest --collect-only -q -p no:cacheprovider "$@" 2>/dev/null |
    grep '::' > "$logs/$name.collected.txt"
  # -v: every finished test logs its name and outcome, so a part cut off by its time limit still
  # says which tests failed (gpu_suite_report.py reads them when there is no XML).
  run_part "$name" "$limit" $py -m pytest -v -rfEs -p no:cacheprovider "${xdist[@]}" \
    --junitxml="$logs/$name.xml" "$@"
}
: > "$logs/parts.txt"
run_one() {
  local part=$1
  case $part in
    probe) run_part probe 120 $py scripts/gpu_probe.py ;;
    cpp) if [ -x "${ORTMLX_CPP_TESTS:-}" ]; then
           MLX_ENABLE_TF32=0 run_part cpp 300 "$ORTMLX_CPP_TESTS" --gtest_output=xml:"$logs/cpp.xml"
         else echo "cpp: no ORTMLX_CPP_TESTS binary" | tee -a "$logs/parts.txt"; fi ;;
    ops) pytest_part ops 560 tests/ops ;;
    # The op suite in two halves (about 3,200 and 3,500 tests), each one call's work on an H200.
    ops1) pytest_part ops1 560 tests/ops/test_[a-l]*.py ;;
    ops2) pytest_part ops2 560 tests/ops/test_[m-z]*.py ;;
    list) mapfile -t ids < "${GPU_SUITE_LIST:?GPU_SUITE_LIST names the file of test ids}"
          pytest_part list 560 "${ids[@]}" ;;
    contracts) pytest_part contracts 400 tests/contracts ;;
    engine) pytest_part engine 300 tests/engine ;;
    # The --html page test needs headless Chromium, which the GPU machine's image lacks; the page
    # is built from the EP's report, the same on every backend (CPU CI runs it).
    plugin) pytest_part plugin 300 tests/plugin \
              --deselect tests/plugin/test_html.py::test_html_page_in_headless_chromium ;;
    external) pytest_part external 400 tests/external ;;
    corpus) pytest_part corpus 400 tests/corpus ;;
    docs) pytest_part docs 120 tests/test_docs.py ;;
    fuzz) ORTMLX_FUZZ_CASES=${ORTMLX_FUZZ_CASES:-3000} ORTMLX_FUZZ_WORKERS=${ORTMLX_FUZZ_WORKERS:-4} \
            ORTMLX_FUZZ_MEM_CAP_GB=0 pytest_part fuzz 400 tests/fuzz ;;
    demo) run_part demo 300 $py -m ortmlx demo ;;
    precision) run_part precision 300 $py scripts/gpu_precision.py ;;
    *) echo "unknown part $part" ;;
  esac
}
if [ "${GPU_SUITE_PARALLEL:-0}" = 1 ]; then
  ( while sleep 10; do snapshot; done ) &
  snapper=$!
  pids=()
  for part in "${parts[@]}"; do run_one "$part" & pids+=($!); done
  wait "${pids[@]}"
  kill "$snapper" 2>/dev/null
else
  for part in "${parts[@]}"; do run_one "$part"; done
fi
echo "total seconds: $(( $(date +%s) - start ))" >> "$logs/parts.txt"
$py scripts/gpu_suite_report.py "$logs" > "$out/gpu_suite.md"
snapshot
cat "$out/gpu_suite.md"
