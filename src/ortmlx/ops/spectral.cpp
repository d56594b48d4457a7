// Spectral family: HannWindow, HammingWindow, BlackmanWindow (opset 17), DFT (opsets 17, 20),
// STFT, MelWeightMatrix (opset 17).
//
// DFT runs MLX's FFT (mx::fft) in complex64: forward, inverse (scaled by 1/n, as ONNX defines it),
// or onesided for real input (the first n/2 + 1 bins). The signal is padded with zeros or
// truncated to dft_length first. Results differ from ORT's own FFT in float32 rounding only.
//
// STFT: the frames (start i * frame_step, frame_length long) gathered from the signal, times the
// window, then the DFT above over each frame. ORT's kernel decides the frame count in float32,
// floor((length - frame_length) / float(frame_step)) + 1, and so does this one. Its kernel reads
// the window as complex values when the signal is complex (past the end of a real window): that
// form is refused. A complex onesided STFT keeps the first frame_length / 2 + 1 bins of the
// full DFT, as ORT does.
//
// MelWeightMatrix is built on the host with ORT's kernel's arithmetic (window_functions.cc), not
// the ONNX reference's: the edge check in float32, the mel points spaced by
// (mel(upper) - mel(lower)) / (num_mel_bins + 2) in double, each point's bin
// floor((dft_length + 1) * hz / sample_rate), triangles written column by column with unsigned
// bin differences (a filter whose points run backwards writes nothing). The values follow from
// the same operations in the same types; a bin past the matrix (where ORT's kernel would write
// out of bounds) raises.
//
// The windows are computed on the host, the way ORT's CPU kernel computes them (its
// window_functions.cc): the cosine-sum a0 - a1 cos(t i) + a2 cos(2 t i) in double, with
// t = 2 * 3.14159265 / N (ORT's truncated pi, N = size when periodic, size - 1 otherwise) and
// the coefficients rounded to float first, then one cast to the output type. Doing the same
// arithmetic gives ORT's values bit for bit (a symmetric window of size 1 divides by zero and
// is NaN there as here).
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <complex>

#include <mlx/fft.h>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/host_values.h"
#include "ortmlx/ops/op_args.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

struct CosineSum {
  float a0, a1, a2;
};

// ORT's coefficients, as floats (the kernel declares them float).
constexpr CosineSum kHann{.5f, .5f, 0.f};
constexpr CosineSum kHamming{25.f / 46.f, 1.f - 25.f / 46.f, 0.f};
constexpr CosineSum kBlackman{.5f - .16f / 2.f, .5f, .16f / 2.f};

ClaimResult claim_window(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 1, "expects 1 input and 1 output");
  auto r = refuse_unknown_attrs(c, {"output_datatype", "periodic"});
  if (!r.ok) return r;
  r = require_input_type(
      c, 0, [](ElemType t) { return t == ElemType::kInt32 || t == ElemType::kInt64; },
      "size must be int32 or int64");
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.input_rank(0) == 0 || c.input_rank(0) == 1, "size must be a scalar");
  const int64_t periodic = c.node().attr_int("periodic", 1);
  ORTMLX_REQUIRE(periodic == 0 || periodic == 1, "periodic must be 0 or 1");
  // ORT also writes integer and float64 windows; integers would be cast from a NaN (symmetric
  // size 1, undefined behaviour in C++) and float64 has no MLX dtype on every backend.
  const int64_t dt = c.node().attr_int("output_datatype", 1);
  ORTMLX_REQUIRE(dt == static_cast<int64_t>(ElemType::kFloat),
                 "output_datatype " + std::to_string(dt) + " is not implemented (float32 only)");
  return ClaimResult::yes();
}

TranslateFn translate_window(CosineSum w) {
  return [w](TranslationContext& ctx, const NodeDesc& n) {
    const int64_t size = host_int(ctx, n, 0, "size");
    if (size < 0) throw std::runtime_error("window size " + std::to_string(size) + " is negative");
    if (size > std::numeric_limits<int32_t>::max())
      throw std::runtime_error("window size " + std::to_string(size) + " exceeds MLX's int32 dims");
    const bool periodic = n.attr_int("periodic", 1) == 1;
    constexpr double kPi = 3.14159265;  // ORT's constant, not M_PI: the values follow from it
    const double tau = 2 * kPi;
    // ORT divides by a size_t: size - 1 of a symmetric window of size 0 never gets used.
    const double denominator = static_cast<double>(periodic ? size : size - 1);
    const double step = tau / denominator;
    std::vector<float> out(static_cast<size_t>(size));
    for (int64_t i = 0; i < size; ++i) {
      const double di = static_cast<double>(i);
      const double a2_term = w.a2 == 0 ? 0.0 : w.a2 * std::cos(2 * step * di);
      out[static_cast<size_t>(i)] = static_cast<float>(w.a0 - w.a1 * std::cos(step * di) + a2_term);
    }
    ctx.bind_output(n, 0, mx::array(out.begin(), {static_cast<int>(size)}, mx::float32));
  };
}

// ---------------------------------------------------------------- DFT

ClaimResult claim_dft(const ClaimContext& c) {
  const bool axis_input = c.node().since_version >= 20;
  ORTMLX_REQUIRE(c.num_inputs() >= 1 && c.num_inputs() <= (axis_input ? 3u : 2u),
                 "unexpected inputs");
  ORTMLX_REQUIRE(c.num_outputs() == 1, "expects 1 output");
  auto r = axis_input ? refuse_unknown_attrs(c, {"inverse", "onesided"})
                      : refuse_unknown_attrs(c, {"axis", "inverse", "onesided"});
  if (!r.ok) return r;
  r = require_input_type(
      c, 0, [](ElemType t) { return t == ElemType::kFloat; },
      "float32 only (MLX's FFT is complex64)");
  if (!r.ok) return r;
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(rank >= 2, "input rank must be known and at least 2");
  const TensorInfo* x = c.input(0);
  const int64_t last = x->shape.back();
  ORTMLX_REQUIRE(last == 1 || last == 2, "the last dim must be a static 1 (real) or 2 (complex)");
  const int64_t inverse = c.node().attr_int("inverse", 0);
  const int64_t onesided = c.node().attr_int("onesided", 0);
  ORTMLX_REQUIRE(inverse == 0 || inverse == 1, "inverse must be 0 or 1");
  ORTMLX_REQUIRE(onesided == 0 || onesided == 1, "onesided must be 0 or 1");
  ORTMLX_REQUIRE(onesided == 0 || (inverse == 0 && last == 1),
                 "onesided is implemented for a forward DFT of real input only");
  if (c.has_input(1)) {
    r = require_input_type(
        c, 1, [](ElemType t) { return t == ElemType::kInt32 || t == ElemType::kInt64; },
        "dft_length must be int32 or int64");
    if (!r.ok) return r;
  }
  if (axis_input && c.has_input(2)) {
    r = require_input_type(
        c, 2, [](ElemType t) { return t == ElemType::kInt64; }, "axis must be int64");
    if (!r.ok) return r;
  }
  if (!axis_input) {
    const int64_t axis = c.node().attr_int("axis", 1);
    ORTMLX_REQUIRE(axis >= 1 && axis <= rank - 2, "axis must be a signal axis (1 .. rank - 2)");
  }
  return ClaimResult::yes();
}

void translate_dft(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  const int rank = static_cast<int>(x.ndim());
  if (rank < 2 || (x.shape(-1) != 1 && x.shape(-1) != 2))
    throw std::runtime_error("DFT input's last dim must be 1 (real) or 2 (complex)");
  int64_t axis = 1;
  if (n.since_version >= 20) {
    axis = n.inputs.size() > 2 && !n.inputs[2].empty() ? host_int(ctx, n, 2, "axis") : -2;
    // Opset 20: [-r, -2] or [0, r - 2], counted on the input's rank (its last dim is re/im).
    if (axis < -rank || axis > rank - 2 || axis == -1)
      throw std::runtime_error("axis " + std::to_string(axis) + " is out of range");
    if (axis < 0) axis += rank;
  } else {
    axis = n.attr_int("axis", 1);
  }
  if (axis < 0 || axis > rank - 2) throw std::runtime_error("axis is not a signal axis");
  const int ax = static_cast<int>(axis);
  int64_t length = x.shape(ax);
  if (n.inputs.size() > 1 && !n.inputs[1].empty()) {
    length = host_int(ctx, n, 1, "dft_length");
    if (length <= 0) throw std::runtime_error("dft_length must be positive");
  }
  const int len = checked_int(length, "dft_length");
  if (x.size() == 0) {
    // An empty batch or other non-signal dim: an empty result (MLX's take refuses to gather from
    // an empty array). An empty signal axis without a dft_length raises (ORT's kernel divides by
    // zero there); with one, the padded signal is all zeros.
    if (x.shape(ax) == 0 && (n.inputs.size() < 2 || n.inputs[1].empty()))
      throw std::runtime_error("the signal axis is empty");
    mx::Shape out = x.shape();
    out[static_cast<size_t>(ax)] = n.attr_int("onesided", 0) == 1 ? len / 2 + 1 : len;
    out.back() = 2;
    ctx.bind_output(n, 0, mx::zeros(out, mx::float32, s));
    return;
  }
  const mx::array re = mx::take(x, 0, rank - 1, s);
  mx::array z = mx::astype(re, mx::complex64, s);
  if (x.shape(-1) == 2) {
    const mx::array im = mx::astype(mx::take(x, 1, rank - 1, s), mx::complex64, s);
    z = mx::add(z, mx::multiply(im, mx::array(std::complex<float>(0.f, 1.f)), s), s);
  }
  mx::array y = mx::zeros({}, mx::complex64, s);
  if (n.attr_int("inverse", 0) == 1) {
    y = mx::fft::ifft(z, len, ax, mx::fft::FFTNorm::Backward, s);
  } else if (n.attr_int("onesided", 0) == 1) {
    y = mx::fft::rfft(re, len, ax, mx::fft::FFTNorm::Backward, s);
  } else {
    y = mx::fft::fft(z, len, ax, mx::fft::FFTNorm::Backward, s);
  }
  ctx.bind_output(n, 0, mx::stack({mx::real(y, s), mx::imag(y, s)}, -1, s));
}

// ---------------------------------------------------------------- STFT

ClaimResult claim_stft(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() >= 2 && c.num_inputs() <= 4 && c.num_outputs() == 1,
                 "expects 2 to 4 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {"onesided"});
  if (!r.ok) return r;
  const int64_t onesided = c.node().attr_int("onesided", 1);
  ORTMLX_REQUIRE(onesided == 0 || onesided == 1, "onesided must be 0 or 1");
  r = require_input_type(
      c, 0, [](ElemType t) { return t == ElemType::kFloat; },
      "float32 only (MLX's FFT is complex64)");
  if (!r.ok) return r;
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(rank == 2 || rank == 3, "signal rank must be known and 2 or 3");
  int64_t components = 1;
  if (rank == 3) {
    components = c.input(0)->shape.back();
    ORTMLX_REQUIRE(components == 1 || components == 2,
                   "the signal's last dim must be a static 1 (real) or 2 (complex)");
  }
  auto int_scalar = [](ElemType t) { return t == ElemType::kInt32 || t == ElemType::kInt64; };
  r = require_input_type(c, 1, int_scalar, "frame_step must be int32 or int64");
  if (!r.ok) return r;
  if (c.has_input(2)) {
    r = require_input_type(
        c, 2, [](ElemType t) { return t == ElemType::kFloat; }, "the window must be float32");
    if (!r.ok) return r;
    ORTMLX_REQUIRE(c.input_rank(2) != 0, "the window must not be a scalar");
    // ORT's kernel reads a real window as complex values for a complex signal.
    ORTMLX_REQUIRE(components == 1,
                   "a window with a complex signal is not implemented (ORT CPU reads the window "
                   "as complex values)");
  }
  if (c.has_input(3)) {
    r = require_input_type(c, 3, int_scalar, "frame_length must be int32 or int64");
    if (!r.ok) return r;
  }
  ORTMLX_REQUIRE(c.has_input(2) || c.has_input(3), "needs a window or a frame_length");
  return ClaimResult::yes();
}

void translate_stft(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array x = ctx.input(n, 0);
  if (x.ndim() == 2) x = mx::expand_dims(x, 2, s);
  if (x.ndim() != 3 || (x.shape(2) != 1 && x.shape(2) != 2))
    throw std::runtime_error("STFT signal must be [batch, length] or [batch, length, 1 or 2]");
  const int64_t length = x.shape(1);
  const int64_t step = host_int(ctx, n, 1, "frame_step");
  if (step <= 0) throw std::runtime_error("frame_step must be greater than zero");
  const bool has_window = n.inputs.size() > 2 && !n.inputs[2].empty();
  const bool has_length = n.inputs.size() > 3 && !n.inputs[3].empty();
  std::optional<mx::array> window;
  int64_t frame_length = 0;
  if (has_window) {
    const mx::array wv = ctx.input(n, 2);
    if (wv.ndim() == 0) throw std::runtime_error("the window must not be a scalar");
    // ORT's kernel takes the window's first dim as its size and reads that many values of its
    // flattened data (a 1-D window in every valid model).
    frame_length = wv.shape(0);
    if (wv.size() < static_cast<size_t>(frame_length))
      throw std::runtime_error("the window holds " + std::to_string(wv.size()) +
                               " values, fewer than its first dim " + std::to_string(frame_length));
    window = mx::slice(mx::flatten(wv, s), {0}, {wv.shape(0)}, s);
  }
  if (has_length) {
    const int64_t given = host_int(ctx, n, 3, "frame_length");
    if (has_window && given != frame_length)
      throw std::runtime_error("frame_length " + std::to_string(given) +
                               " differs from the window's size " + std::to_string(frame_length));
    frame_length = given;
  }
  const bool onesided = n.attr_int("onesided", 1) == 1;
  if (x.shape(0) == 0) {
    // An empty batch: ORT's kernel computes the output shape and runs no frame, so a frame
    // length of 0 or below is valid as long as that shape has no negative dim (-1 gives
    // (length + 1) / step + 1 frames of (-1 >> 1) + 1 = 0 onesided bins; -3 a dim of -1, which
    // ORT's allocator rejects). MLX's take refuses to gather from an empty array.
    if (frame_length > length)
      throw std::runtime_error("frame_length " + std::to_string(frame_length) +
                               " exceeds the signal length " + std::to_string(length));
    const int64_t bins = onesided ? (frame_length >> 1) + 1 : frame_length;
    if (bins < 0)  // so frame_length >= -2 below
      throw std::runtime_error("frame_length " + std::to_string(frame_length) +
                               " gives a negative bin count (" + std::to_string(bins) + ")");
    const int64_t frames = static_cast<int64_t>(
        std::floor(static_cast<float>(length - frame_length) / static_cast<float>(step)) + 1);
    ctx.bind_output(n, 0,
                    mx::zeros({0, checked_int(frames, "frame count"), checked_int(bins, "bins"), 2},
                              mx::float32, s));
    return;
  }
  if (frame_length <= 0) throw std::runtime_error("frame_length must be greater than zero");
  if (frame_length > length)
    throw std::runtime_error("frame_length " + std::to_string(frame_length) +
                             " exceeds the signal length " + std::to_string(length));
  // ORT's frame count, computed in float32 as its kernel does.
  const int64_t frames = static_cast<int64_t>(
      std::floor(static_cast<float>(length - frame_length) / static_cast<float>(step)) + 1);
  // Rounded in float32, the count can reach past the signal (a length beyond 2^24): its last
  // frame would read past the end (ORT's kernel does).
  if (frames > 1 && checked_add(checked_mul(frames - 1, step, "frame starts"), frame_length,
                                "frame end") > length)
    throw std::runtime_error("the frame count ORT computes in float32 (" + std::to_string(frames) +
                             ") reaches past the signal of length " + std::to_string(length));
  const int w = checked_int(frame_length, "frame_length");
  const int f = checked_int(frames, "frame count");
  // One frame needs no step (a step beyond int32 is valid then).
  const int step_i = f > 1 ? checked_int(step, "frame_step") : 0;
  checked_int(checked_mul(frames, frame_length, "frames * frame_length"), "frame elements");
  // Start of frame i plus offset j, each below `length` (the last frame ends inside the signal).
  const mx::array starts = mx::multiply(mx::arange(f, mx::int32, s), mx::array(step_i), s);
  const mx::array idx = mx::add(mx::reshape(starts, {f, 1}, s),
                                mx::reshape(mx::arange(w, mx::int32, s), {1, w}, s), s);
  mx::array frames_x = mx::take(x, idx, 1, s);  // [batch, frames, w, components]
  if (window) frames_x = mx::multiply(frames_x, mx::reshape(*window, {w, 1}, s), s);
  const mx::array re = mx::take(frames_x, 0, 3, s);
  mx::array y = mx::zeros({}, mx::complex64, s);
  if (frames_x.shape(3) == 1) {
    y = onesided
            ? mx::fft::rfft(re, w, 2, mx::fft::FFTNorm::Backward, s)
            : mx::fft::fft(mx::astype(re, mx::complex64, s), w, 2, mx::fft::FFTNorm::Backward, s);
  } else {
    const mx::array im = mx::astype(mx::take(frames_x, 1, 3, s), mx::complex64, s);
    const mx::array z = mx::add(mx::astype(re, mx::complex64, s),
                                mx::multiply(im, mx::array(std::complex<float>(0.f, 1.f)), s), s);
    y = mx::fft::fft(z, w, 2, mx::fft::FFTNorm::Backward, s);
    if (onesided) y = mx::slice(y, {0, 0, 0}, {y.shape(0), f, w / 2 + 1}, s);
  }
  ctx.bind_output(n, 0, mx::stack({mx::real(y, s), mx::imag(y, s)}, -1, s));
}

// ---------------------------------------------------------------- MelWeightMatrix

ClaimResult claim_mel_weight_matrix(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 5 && c.num_outputs() == 1, "expects 5 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {"output_datatype"});
  if (!r.ok) return r;
  auto int_scalar = [](ElemType t) { return t == ElemType::kInt32 || t == ElemType::kInt64; };
  static const char* const kIntNames[] = {"num_mel_bins", "dft_length", "sample_rate"};
  for (size_t i = 0; i < 3; ++i) {
    r = require_input_type(c, i, int_scalar, "must be int32 or int64");
    if (!r.ok) return ClaimResult::no(std::string(kIntNames[i]) + ": " + r.reason);
  }
  for (size_t i = 3; i < 5; ++i) {
    r = require_input_type(
        c, i, [](ElemType t) { return t == ElemType::kFloat; }, "the edges must be float32");
    if (!r.ok) return r;
  }
  // ORT also writes float64 and integer matrices (integer division of unsigned bin distances,
  // narrowed to the output type first); float64 has no MLX dtype on every backend.
  const int64_t dt = c.node().attr_int("output_datatype", 1);
  ORTMLX_REQUIRE(dt == static_cast<int64_t>(ElemType::kFloat),
                 "output_datatype " + std::to_string(dt) + " is not implemented (float32 only)");
  return ClaimResult::yes();
}

float host_float(const TranslationContext& ctx, const NodeDesc& n, size_t i, const char* what) {
  mx::array a = host_array(ctx, n, i, what);
  if (a.size() != 1)
    throw std::runtime_error(std::string(what) + " must hold one value, got " +
                             std::to_string(a.size()));
  a = mx::astype(mx::flatten(a), mx::float32);
  mx::eval(a);
  return a.data<float>()[0];
}

void translate_mel_weight_matrix(TranslationContext& ctx, const NodeDesc& n) {
  const int64_t num_mel_bins = host_int(ctx, n, 0, "num_mel_bins");
  const int64_t dft_length = host_int(ctx, n, 1, "dft_length");
  const int64_t sample_rate = host_int(ctx, n, 2, "sample_rate");
  const float lower_hz = host_float(ctx, n, 3, "lower_edge_hertz");
  const float upper_hz = host_float(ctx, n, 4, "upper_edge_hertz");
  if (num_mel_bins < 0)
    throw std::runtime_error("num_mel_bins " + std::to_string(num_mel_bins) + " is negative");
  if (dft_length == std::numeric_limits<int64_t>::max())
    throw std::runtime_error("dft_length is too large");
  const int64_t bins = dft_length / 2 + 1;  // C++ division, as ORT's: -1 gives 1 bin
  // ORT's range checks, in float32: (int64 + 1) * float / int64.
  const float lowest =
      std::floor(static_cast<float>(dft_length + 1) * lower_hz / static_cast<float>(sample_rate));
  const float highest =
      std::floor(static_cast<float>(dft_length + 1) * upper_hz / static_cast<float>(sample_rate));
  if (!(lowest >= 0 && lowest < static_cast<float>(bins)))
    throw std::runtime_error(
        "lower_edge_hertz produces a mel triangle filter bank that is out of range given the "
        "dft_length and the sample_rate");
  if (!(highest >= 0 && highest < static_cast<float>(bins)))
    throw std::runtime_error(
        "upper_edge_hertz produces a mel triangle filter bank that is out of range given the "
        "dft_length and the sample_rate");
  const mx::Shape shape = checked_shape({bins, num_mel_bins}, mx::float32);
  const auto mel_bins = static_cast<size_t>(num_mel_bins);
  std::vector<float> out(static_cast<size_t>(bins) * mel_bins, 0.f);
  auto hz_to_mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  auto mel_to_hz = [](double mel) { return 700 * (std::pow(10, mel / 2595) - 1); };
  const size_t points = mel_bins + 2;
  const double low_mel = hz_to_mel(lower_hz);
  const double mel_step = (hz_to_mel(upper_hz) - low_mel) / static_cast<float>(points);
  std::vector<size_t> point_bin(points);
  for (size_t i = 0; i < points; ++i) {
    const double hz = mel_to_hz(low_mel + mel_step * static_cast<double>(i));
    const double bin =
        std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate));
    // Between the checked edges, so within [0, bins) unless rounding pushes one past.
    if (!(bin >= 0 && bin < static_cast<double>(bins)))
      throw std::runtime_error("a mel point falls outside the spectrogram bins");
    point_bin[i] = static_cast<size_t>(bin);
  }
  auto at = [&](size_t row, size_t col) -> float& { return out[row * mel_bins + col]; };
  for (size_t i = 0; i < mel_bins; ++i) {
    const size_t left = point_bin[i], center = point_bin[i + 1], right = point_bin[i + 2];
    const size_t rise = center - left;  // unsigned, as ORT's: backwards points wrap
    if (rise == 0) {
      at(center, i) = 1.f;
    } else {
      for (size_t j = left; j <= center; ++j)
        at(j, i) = static_cast<float>(j - left) / static_cast<float>(rise);
    }
    const size_t fall = right - center;
    if (fall > 0) {
      for (size_t j = center; j < right; ++j)
        at(j, i) = static_cast<float>(right - j) / static_cast<float>(fall);
    }
  }
  ctx.bind_output(n, 0, mx::array(out.begin(), shape, mx::float32));
}

}  // namespace

void register_spectral_ops(OpRegistry& r) {
  r.add("", "DFT", 17, 1 << 30, claim_dft, translate_dft);
  r.add("", "STFT", 17, 1 << 30, claim_stft, translate_stft);
  r.add("", "MelWeightMatrix", 17, 1 << 30, claim_mel_weight_matrix, translate_mel_weight_matrix);
  r.add("", "HannWindow", 17, 1 << 30, claim_window, translate_window(kHann));
  r.add("", "HammingWindow", 17, 1 << 30, claim_window, translate_window(kHamming));
  r.add("", "BlackmanWindow", 17, 1 << 30, claim_window, translate_window(kBlackman));
}

}  // namespace ortmlx
