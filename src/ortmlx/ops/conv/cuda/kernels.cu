// NCHW -> NHWC for the convolutions of the CUDA flavour (MLX convolves channels-last only), built
// by nvcc into an sm_90 cubin the library embeds (cmake/EmbedCudaKernels.cmake); host side:
// channels_last.cpp. MLX's general strided copy moved a 32 x 3 x 224 x 224 image batch in
// 0.26 ms on an H100 (its reads stride by H*W); these read and write whole rows.
#ifndef ORTMLX_CONV_TAG
#define ORTMLX_CONV_TAG dev
#endif
#define CV_CAT2(a, b) a##b
#define CV_CAT(a, b) CV_CAT2(a, b)

extern __shared__ float conv_smem[];  // the tiled kernel's 32 x 33 tile (dynamic: 4,224 bytes)

// Few channels (images): a thread per pixel reads its c values (consecutive threads, consecutive
// pixels: coalesced per channel) and writes them side by side (a warp writes 32 c consecutive
// floats). Grid-stride over the b * hw pixels.
extern "C" __global__ void __launch_bounds__(256)
    CV_CAT(ortmlx_nchw_to_nhwc_few_, ORTMLX_CONV_TAG)(const float* x, float* y, int b, int c,
                                                      int hw) {
  const long long pixels = static_cast<long long>(b) * hw;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < pixels;
       i += stride) {
    const long long bi = i / hw, p = i % hw;
    const float* src = x + bi * c * hw + p;
    float* dst = y + i * c;
    for (int k = 0; k < c; ++k) dst[k] = src[static_cast<long long>(k) * hw];
  }
}

// Many channels: 32 x 32 tiles of (channel, pixel) through shared memory, block (32, 8); grid
// (pixel tiles, channel tiles, batch). Reads run along pixels, writes along channels.
extern "C" __global__ void __launch_bounds__(256)
    CV_CAT(ortmlx_nchw_to_nhwc_tiled_, ORTMLX_CONV_TAG)(const float* x, float* y, int b, int c,
                                                        int hw) {
  float(*tile)[33] = reinterpret_cast<float(*)[33]>(conv_smem);  // +1: reads hit 32 banks
  const int p0 = static_cast<int>(blockIdx.x) * 32, c0 = static_cast<int>(blockIdx.y) * 32;
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const long long base = static_cast<long long>(blockIdx.z) * c * hw;
  (void)b;
  for (int k = ty; k < 32; k += 8) {
    const int ch = c0 + k, p = p0 + tx;
    if (ch < c && p < hw) tile[k][tx] = x[base + static_cast<long long>(ch) * hw + p];
  }
  __syncthreads();
  for (int k = ty; k < 32; k += 8) {
    const int p = p0 + k, ch = c0 + tx;
    if (ch < c && p < hw) y[base + static_cast<long long>(p) * c + ch] = tile[tx][k];
  }
}
