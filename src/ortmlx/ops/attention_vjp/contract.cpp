#include "ortmlx/ops/attention_vjp/contract.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace ortmlx::attention_vjp {

namespace {

// A decimal field value: one or more ASCII digits, nothing else (the documented grammar has no
// signs, spaces or exponents; the seed's Rust `i32::from_str` would also take "+4" or "-0").
// Leading zeros are allowed. nullopt when the value does not fit an int32.
std::optional<int32_t> parse_decimal(std::string_view s) {
  if (s.empty()) return std::nullopt;
  int64_t v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + (ch - '0');
    if (v > std::numeric_limits<int32_t>::max()) return std::nullopt;
  }
  return static_cast<int32_t>(v);
}

bool is_hex(char ch) {
  return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

int hex_value(char ch) {
  return ch <= '9' ? ch - '0' : (ch | 0x20) - 'a' + 10;
}

// The scale field: exactly 8 hex digits (either case), the float32 bit pattern. The seed's
// `u32::from_str_radix(s, 16)` also takes a '+' sign and any digit count that fits ("s+3e8" would
// be the bit pattern 0x3e8, a scale of 1.4e-42): not the documented grammar, so refused.
std::optional<uint32_t> parse_scale_bits(std::string_view s) {
  if (s.size() != 8) return std::nullopt;
  uint32_t v = 0;
  for (char ch : s) {
    if (!is_hex(ch)) return std::nullopt;
    v = v * 16 + static_cast<uint32_t>(hex_value(ch));
  }
  return v;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

std::optional<int32_t> field_int(std::string_view field, char letter) {
  if (field.empty() || field[0] != letter) return std::nullopt;
  return parse_decimal(field.substr(1));
}

bool checked_mul_i32(int32_t a, int32_t b) {
  const int64_t p = int64_t{a} * int64_t{b};
  return p >= std::numeric_limits<int32_t>::min() && p <= std::numeric_limits<int32_t>::max();
}

std::string dims_str(const TensorInfo& t) {
  std::string s = "(";
  for (size_t i = 0; i < t.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
  return s + ")";
}

}  // namespace

bool Config::wants(int output) const {
  for (int o : outputs)
    if (o == output) return true;
  return false;
}

std::optional<Config> Config::parse(std::string_view name) {
  Config c;
  c.recompute = name.substr(0, kRecomputePrefix.size()) == kRecomputePrefix;
  const std::string_view prefix = c.recompute ? kRecomputePrefix : kPlainPrefix;
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  const auto fields = split(name.substr(prefix.size()), '_');
  if (fields.size() != 9) return std::nullopt;

  const auto rank = field_int(fields[0], 'r');
  const auto hq = field_int(fields[1], 'q');
  const auto hk = field_int(fields[2], 'k');
  const auto d = field_int(fields[3], 'd');
  if (!rank || !hq || !hk || !d) return std::nullopt;
  if (fields[4].empty() || fields[4][0] != 's') return std::nullopt;
  const auto bits = parse_scale_bits(fields[4].substr(1));
  if (!bits) return std::nullopt;
  float scale;
  std::memcpy(&scale, &*bits, sizeof scale);
  const auto causal = field_int(fields[5], 'c');
  if (!causal) return std::nullopt;
  if (fields[6].empty() || fields[6][0] != 'o') return std::nullopt;
  std::vector<int> outputs;
  for (char ch : fields[6].substr(1)) {
    if (ch < '0' || ch > '9') return std::nullopt;
    outputs.push_back(ch - '0');
  }
  const auto mask = field_int(fields[7], 'm');
  if (!mask) return std::nullopt;

  // The seed's validity rules, in its order (all must hold).
  if (c.recompute && (*d < 32 || *d > 256)) return std::nullopt;
  if (*rank != 3 && *rank != 4) return std::nullopt;
  if (*hq <= 0 || *hk <= 0 || *hq % *hk != 0) return std::nullopt;
  if (*d < 8 || *d > 256 || *d % 8 != 0) return std::nullopt;
  if (!checked_mul_i32(*hq, *d) || !checked_mul_i32(*hk, *d)) return std::nullopt;
  if (!std::isfinite(scale) || !(scale > 0.f)) return std::nullopt;
  if (*causal != 0 && *causal != 1) return std::nullopt;
  if (*mask < 0 || *mask > 2) return std::nullopt;
  if (outputs.empty()) return std::nullopt;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i] > 2) return std::nullopt;
    if (i > 0 && outputs[i - 1] >= outputs[i]) return std::nullopt;
  }
  if (fields[8].size() != 16) return std::nullopt;
  for (char ch : fields[8])
    if (!is_hex(ch)) return std::nullopt;

  c.rank = *rank;
  c.hq = *hq;
  c.hk = *hk;
  c.d = *d;
  c.scale = scale;
  c.causal = *causal;
  c.outputs = std::move(outputs);
  c.mask = *mask;
  return c;
}

// Per 128-thread group: 4 * kv_rows * 32 floats of score/probability staging plus the K and V
// rows of the tile (dK/dV kernel); 3 * 16 * 32 floats of staging plus the 16 Q rows (dQ kernel).
int dkv_tile_bytes(const Config& c) {
  return (4 * c.kv_rows() * 32 + 2 * c.kv_rows() * c.d) * 4;
}
int dq_tile_bytes(const Config& c) {
  return (3 * kQueryRows * 32 + kQueryRows * c.d) * 4;
}

bool use_dense(const Config& c, const std::array<int64_t, 4>& q, const std::array<int64_t, 4>& k,
               std::optional<uint64_t> explicit_limit) {
  if (c.recompute && !explicit_limit) return true;
  const uint64_t limit = explicit_limit.value_or(kDefaultDenseLimitBytes);
  uint64_t bytes = 4;
  for (int64_t dim : {q[0], int64_t{c.hq}, q[2], k[2]}) {
    if (dim < 0) return false;
    const uint64_t u = static_cast<uint64_t>(dim);
    if (u != 0 && bytes > std::numeric_limits<uint64_t>::max() / u) return false;  // overflow
    bytes *= u;
  }
  return bytes <= limit;
}

ClaimResult claim(const ClaimContext& ctx) {
  const auto parsed = Config::parse(ctx.node().op_type);
  ORTMLX_REQUIRE(parsed.has_value(),
                 "unsupported AttentionVJP function contract '" + ctx.node().op_type + "'");
  const Config& c = *parsed;
  const size_t expected_inputs = c.recompute ? 5 : 6;
  ORTMLX_REQUIRE(ctx.num_inputs() == expected_inputs && ctx.num_outputs() == c.outputs.size(),
                 "AttentionVJP interface mismatch: expected " + std::to_string(expected_inputs) +
                     " inputs and " + std::to_string(c.outputs.size()) + " outputs, got " +
                     std::to_string(ctx.num_inputs()) + " and " +
                     std::to_string(ctx.num_outputs()));
  // float32, or float16/bfloat16 (computed in float32, the gradients rounded to the input type:
  // docs/ATTENTION_VJP.md), one type for every tensor input.
  const TensorInfo* first = ctx.input(0);
  const ElemType io = first ? first->dtype : ElemType::kUndefined;
  const bool io_ok =
      io == ElemType::kFloat || io == ElemType::kFloat16 || io == ElemType::kBFloat16;
  for (int i = 0; i < c.tensor_inputs(); ++i) {
    const TensorInfo* info = ctx.input(static_cast<size_t>(i));
    const std::string which = "input " + std::to_string(i);
    ORTMLX_REQUIRE(info != nullptr, "AttentionVJP requires tensor inputs (" + which + ")");
    ORTMLX_REQUIRE(io_ok && info->dtype == io && info->has_shape &&
                       info->shape.size() == static_cast<size_t>(c.rank),
                   "AttentionVJP requires rank-matched tensors of one type, FP32, FP16 or BF16 (" +
                       which + ": " + elem_type_name(info->dtype) + " rank " +
                       std::to_string(info->rank()) + ", want " +
                       (io_ok ? elem_type_name(io) : std::string("float")) + " rank " +
                       std::to_string(c.rank) + ")");
    const int64_t heads = c.heads_of_input(i);
    const int64_t width = c.rank == 3 ? heads * c.d : c.d;
    // Compared literally, as the seed does: a dynamic (-1) last dim is refused.
    ORTMLX_REQUIRE(info->shape[static_cast<size_t>(c.rank - 1)] == width,
                   "AttentionVJP static width mismatch (" + which + " " + dims_str(*info) +
                       ", last dim must be " + std::to_string(width) + ")");
    if (c.rank == 4)
      ORTMLX_REQUIRE(info->shape[1] == heads, "AttentionVJP head count mismatch (" + which + " " +
                                                  dims_str(*info) + ", dim 1 must be " +
                                                  std::to_string(heads) + ")");
  }
  const TensorInfo* mask = ctx.input(static_cast<size_t>(c.tensor_inputs()));
  ORTMLX_REQUIRE(mask != nullptr, "AttentionVJP mask tensor required");
  ORTMLX_REQUIRE(mask->has_shape && mask->shape.size() >= 1 && mask->shape.size() <= 4,
                 "AttentionVJP mask rank must be 1..4 (got " + std::to_string(mask->rank()) + ")");
  const ElemType want = c.mask == 2 ? io : ElemType::kBool;
  ORTMLX_REQUIRE(mask->dtype == want, std::string("AttentionVJP mask type mismatch (") +
                                          elem_type_name(mask->dtype) + ", mask kind " +
                                          std::to_string(c.mask) + " needs " +
                                          elem_type_name(want) + ")");
  return ClaimResult::yes();
}

}  // namespace ortmlx::attention_vjp
