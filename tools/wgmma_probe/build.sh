#!/usr/bin/env bash
# Builds the wgmma probe (probe.cu) into $1 (default: build-probe/): `probe` with the descriptor
# fields as cuda/wgmma.cuh sets them, and `probe_swapped` with the two offsets exchanged (should a
# GPU disagree with the layout the kernels assume, the swapped one shows it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/../../build-probe}"
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
mkdir -p "$out"
"$nvcc" -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -o "$out/probe" "$here/probe.cu"
"$nvcc" -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -DORTMLX_WG_LBO_IS_K=0 \
  -o "$out/probe_swapped" "$here/probe.cu"
echo "built $out/probe $out/probe_swapped"
for b in 64 128; do
  "$nvcc" -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -DAVJP_BUCKET=$b \
    -o "$out/dkv_timing_d$b" "$here/dkv_timing.cu"
done
echo "built $out/dkv_timing_d64 $out/dkv_timing_d128"
for b in 64 128; do
  "$nvcc" -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -DAVJP_BUCKET=$b \
    -o "$out/stats_timing_d$b" "$here/stats_timing.cu"
done
echo "built $out/stats_timing_d64 $out/stats_timing_d128"
