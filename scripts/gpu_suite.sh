#!/usr/bin/env bash
# The whole test suite on the GPU machine (make test-cuda), after `source .gpu/env.sh` (see
# scripts/gpu_pack.sh and PLAYBOOK "The GPU"). Each part runs in its own process so that a crash
# is recorded, not fatal; logs and JUnit XML go to $OUT (or ./gpu-out); the table comes last.
#   scripts/gpu_suite.sh [part ...]     parts: probe cpp ops contracts engine plugin external docs demo
#                                       precision (default: all)
set -uo pipefail
out="${OUT:-$PWD/gpu-out}"
mkdir -p "$out"
py=${PYTHON:-python3}
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(probe cpp ops contracts engine plugin external docs demo precision)
export PYTHONUNBUFFERED=1 ORT_LOGGING_LEVEL=3
workers=${GPU_SUITE_WORKERS:-6}
start=$(date +%s)
{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
  $py -c 'import sys, onnxruntime, numpy, onnx; print("python", sys.version.split()[0], "onnxruntime", onnxruntime.__version__, "numpy", numpy.__version__, "onnx", onnx.__version__)'
  echo "MLX: $(basename "$(readlink -f "${ORTMLX_LIBRARY%/*}/mlx/lib/libmlx.so" 2>/dev/null || echo libmlx.so)") mlx-cuda-13 0.32.4 (sm_90 SASS); MLX_ENABLE_TF32=${MLX_ENABLE_TF32:-unset} ONNXRUNTIME_EP_MLX_TF32=${ONNXRUNTIME_EP_MLX_TF32:-unset}"
} > "$out/env.txt" 2>&1
cat "$out/env.txt"
run_part() {  # name, timeout seconds, command...
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc seconds=$(( $(date +%s) - t0 ))" >> "$out/parts.txt"
  echo "== $name: rc=$rc ($(( $(date +%s) - t0 )) s)"; tail -n 3 "$out/$name.log"
}
pytest_part() {  # name, timeout, paths...
  local name=$1 limit=$2; shift 2
  run_part "$name" "$limit" $py -m pytest -q -rfEs -p no:cacheprovider -n "$workers" \
    --junitxml="$out/$name.xml" "$@"
}
: > "$out/parts.txt"
for part in "${parts[@]}"; do
  case $part in
    probe) run_part probe 120 $py scripts/gpu_probe.py ;;
    cpp) if [ -x "${ORTMLX_CPP_TESTS:-}" ]; then
           run_part cpp 300 "$ORTMLX_CPP_TESTS" --gtest_output=xml:"$out/cpp.xml"
         else echo "cpp: no ORTMLX_CPP_TESTS binary" | tee -a "$out/parts.txt"; fi ;;
    ops) pytest_part ops 400 tests/ops ;;
    contracts) pytest_part contracts 400 tests/contracts ;;
    engine) pytest_part engine 300 tests/engine ;;
    plugin) pytest_part plugin 300 tests/plugin ;;
    external) pytest_part external 400 tests/external ;;
    docs) pytest_part docs 120 tests/test_docs.py ;;
    demo) run_part demo 300 $py -m ortmlx demo ;;
    precision) run_part precision 300 $py scripts/gpu_precision.py ;;
    *) echo "unknown part $part" ;;
  esac
done
echo "total seconds: $(( $(date +%s) - start ))" >> "$out/parts.txt"
$py scripts/gpu_suite_report.py "$out" > "$out/gpu_suite.md"
# Few files come back from the device machine: keep the table and one archive of the logs.
(cd "$out" && tar -czf gpu_suite_logs.tgz env.txt parts.txt ./*.log ./*.xml 2>/dev/null && rm -f ./*.log ./*.xml)
cat "$out/gpu_suite.md"
