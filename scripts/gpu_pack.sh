#!/usr/bin/env bash
# Packs the CUDA flavour for the H200 test machine: shared/tools/gpu_bundle.sh (MLX pruned to
# sm_90, libortmlx.so, its dependencies) plus the C++ test binary. Then, on the GPU machine, from
# the checkout root: `source .gpu/env.sh && source .gpu/tests.sh && scripts/gpu_suite.sh`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
build="${1:-build-cuda}"
bash "$root/../shared/tools/gpu_bundle.sh" "$build"
strip --strip-unneeded -o .gpu/ortmlx_cpp_tests "$build/tests/cpp/ortmlx_cpp_tests"
xz -T0 -f .gpu/ortmlx_cpp_tests
strip --strip-unneeded -o .gpu/ortmlx_registry_dump "$build/ortmlx_registry_dump"
xz -T0 -f .gpu/ortmlx_registry_dump
cat > .gpu/tests.sh <<'SH'
# Sourced after .gpu/env.sh: unpacks the C++ test and registry-dump binaries (MLX via LD_LIBRARY_PATH).
xz -dc .gpu/ortmlx_cpp_tests.xz > /tmp/ortmlx-gpu/ortmlx_cpp_tests && chmod +x /tmp/ortmlx-gpu/ortmlx_cpp_tests
xz -dc .gpu/ortmlx_registry_dump.xz > /tmp/ortmlx-gpu/ortmlx_registry_dump && chmod +x /tmp/ortmlx-gpu/ortmlx_registry_dump
export ORTMLX_CPP_TESTS=/tmp/ortmlx-gpu/ortmlx_cpp_tests ORTMLX_REGISTRY_DUMP=/tmp/ortmlx-gpu/ortmlx_registry_dump
SH
du -sh .gpu
