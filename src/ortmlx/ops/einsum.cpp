// Einsum (opset 12+), the forms that reduce exactly to MLX ops: one or two float32 operands,
// explicit ("ij,jk->ik") or implicit ("ij,jk") output, letters only. Per operand, a letter
// repeated in its term takes the diagonal of those two axes (exact: a gather) and letters that
// neither the output nor the other operand uses are summed out; then the two operands meet in one
// (batched) matmul over the shared letters that leave (float32 on MLX's CPU backend through
// OpenBLAS, matmul_cpu.h), or in a broadcast multiply when none do, and a transpose gives the
// output order. That is what ORT's CPU kernel does too (transposes, MatMul, ReduceSum), so results
// agree within float32 rounding. Refused with a reason: ellipsis, three or more operands, a letter
// three times in one term, mixed-case implicit output (numpy and ORT order those differently),
// other dtypes.
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/matmul_cpu.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

struct Equation {
  std::vector<std::string> inputs;
  std::string output;
};

bool is_letter(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

// Parses `text` into terms; returns "" or the reason it is not a form handled here.
std::string parse_equation(const std::string& text, Equation* eq) {
  std::string s;
  for (char ch : text)
    if (ch != ' ') s += ch;
  if (s.find('.') != std::string::npos) return "ellipsis ('...') is not implemented";
  const size_t arrow = s.find("->");
  const std::string lhs = arrow == std::string::npos ? s : s.substr(0, arrow);
  eq->inputs.clear();
  size_t start = 0;
  for (;;) {
    const size_t comma = lhs.find(',', start);
    eq->inputs.push_back(lhs.substr(start, comma == std::string::npos ? comma : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  int count[128] = {};
  for (const auto& term : eq->inputs) {
    int here[128] = {};
    for (char ch : term) {
      if (!is_letter(ch)) return std::string("unexpected character '") + ch + "' in the equation";
      ++count[static_cast<int>(ch)];
      if (++here[static_cast<int>(ch)] > 2)
        return std::string("letter '") + ch + "' appears more than twice in one term";
    }
  }
  if (arrow != std::string::npos) {
    eq->output = s.substr(arrow + 2);
    int seen[128] = {};
    for (char ch : eq->output) {
      if (!is_letter(ch)) return std::string("unexpected character '") + ch + "' in the output";
      if (seen[static_cast<int>(ch)]++)
        return std::string("letter '") + ch + "' repeated in the output";
      if (!count[static_cast<int>(ch)])
        return std::string("output letter '") + ch + "' is in no input";
    }
  } else {
    // Implicit output: the letters seen exactly once, alphabetically.
    eq->output.clear();
    bool lower = false, upper = false;
    for (int ch = 0; ch < 128; ++ch)
      if (count[ch] == 1) {
        eq->output += static_cast<char>(ch);
        (ch >= 'a' ? lower : upper) = true;
      }
    if (lower && upper)
      return "implicit output with both upper- and lower-case letters is not implemented (its "
             "order differs between implementations); give the output explicitly";
  }
  return "";
}

ClaimResult claim_einsum(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_outputs() == 1, "expects 1 output");
  ORTMLX_REQUIRE(c.num_inputs() >= 1, "expects at least 1 input");
  ORTMLX_REQUIRE(c.num_inputs() <= 2, "three or more operands are not implemented");
  auto r = refuse_unknown_attrs(c, {"equation"});
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.node().has_attr("equation"), "the equation attribute is missing");
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    r = require_input_type(c, i, is_float_type, "float16/bfloat16/float32 only");
    if (!r.ok) return r;
  }
  Equation eq;
  const std::string why = parse_equation(c.node().attr_string("equation", ""), &eq);
  ORTMLX_REQUIRE(why.empty(), why);
  ORTMLX_REQUIRE(eq.inputs.size() == c.num_inputs(),
                 "the equation has " + std::to_string(eq.inputs.size()) + " terms for " +
                     std::to_string(c.num_inputs()) + " inputs");
  for (size_t i = 0; i < eq.inputs.size(); ++i) {
    const int64_t rank = c.input_rank(i);
    ORTMLX_REQUIRE(rank < 0 || rank == static_cast<int64_t>(eq.inputs[i].size()),
                   "term '" + eq.inputs[i] + "' does not match the rank " + std::to_string(rank) +
                       " of input " + std::to_string(i));
  }
  return require_same_types(c);
}

// x with letters `l` (one per axis): diagonals of repeated letters taken, letters that `keep`
// does not contain summed out. Updates `l`.
mx::array reduce_operand(mx::array x, std::string& l, const std::string& keep,
                         mx::StreamOrDevice s) {
  if (static_cast<int>(x.ndim()) != static_cast<int>(l.size()))
    throw std::runtime_error("Einsum term '" + l + "' does not match the input's rank " +
                             std::to_string(x.ndim()));
  for (size_t p = 0; p < l.size(); ++p) {
    const size_t q = l.find(l[p], p + 1);
    if (q == std::string::npos) continue;
    if (x.shape(static_cast<int>(p)) != x.shape(static_cast<int>(q)))
      throw std::runtime_error(std::string("Einsum letter '") + l[p] +
                               "' has different sizes in one input");
    // diagonal() drops both axes and appends the diagonal as the last one.
    x = mx::diagonal(x, 0, static_cast<int>(p), static_cast<int>(q), s);
    const char ch = l[p];
    l.erase(q, 1);
    l.erase(p, 1);
    l += ch;
    p = static_cast<size_t>(-1);  // rescan (positions moved)
  }
  std::vector<int> axes;
  std::string kept;
  for (size_t i = 0; i < l.size(); ++i) {
    if (keep.find(l[i]) == std::string::npos)
      axes.push_back(static_cast<int>(i));
    else
      kept += l[i];
  }
  if (!axes.empty()) x = mx::sum(x, axes, false, s);
  l = kept;
  return x;
}

// Axes of `x` (letters `l`) put in the order of `want` (a permutation of l).
mx::array to_order(const mx::array& x, const std::string& l, const std::string& want,
                   mx::StreamOrDevice s) {
  if (l == want) return x;
  std::vector<int> perm;
  for (char ch : want) perm.push_back(static_cast<int>(l.find(ch)));
  return mx::transpose(x, perm, s);
}

// Collapses the `count` axes that start at `from` into one axis (of size 1 when count is 0).
mx::array merge_axes(const mx::array& x, int from, int count, mx::StreamOrDevice s) {
  mx::Shape shape(x.shape().begin(), x.shape().begin() + from);
  int64_t n = 1;
  for (int i = from; i < from + count; ++i) n *= x.shape(i);
  shape.push_back(static_cast<int>(n));
  shape.insert(shape.end(), x.shape().begin() + from + count, x.shape().end());
  return mx::reshape(x, shape, s);
}

// Half types: summed in float32, rounded once (ORT's CPU EP runs float16 Einsum through float32;
// bfloat16, which it has no kernel for, is tested against its float32 result).
mx::array in32(const mx::array& a, mx::StreamOrDevice s) {
  return a.dtype() == mx::float32 ? a : mx::astype(a, mx::float32, s);
}

mx::array narrowed(const mx::array& y, mx::Dtype dt, mx::StreamOrDevice s) {
  return y.dtype() == dt ? y : mx::astype(y, dt, s);
}

void translate_einsum(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  Equation eq;
  const std::string why = parse_equation(n.attr_string("equation", ""), &eq);
  if (!why.empty()) throw std::runtime_error("Einsum: " + why);
  if (eq.inputs.size() == 1) {
    std::string l = eq.inputs[0];
    mx::array x = reduce_operand(in32(ctx.input(n, 0), s), l, eq.output, s);
    ctx.bind_output(n, 0, narrowed(to_order(x, l, eq.output, s), ctx.input(n, 0).dtype(), s));
    return;
  }
  std::string la = eq.inputs[0], lb = eq.inputs[1];
  mx::array a = reduce_operand(in32(ctx.input(n, 0), s), la, eq.output + lb, s);
  mx::array b = reduce_operand(in32(ctx.input(n, 1), s), lb, eq.output + la, s);
  auto in = [](const std::string& str, char ch) { return str.find(ch) != std::string::npos; };
  // Letter groups: batch (both operands, output), left (a only), right (b only), contracted
  // (both, not the output). After reduce_operand every letter is in the output or in both.
  std::string batch, left, right, contracted;
  for (char ch : eq.output) {
    if (in(la, ch) && in(lb, ch))
      batch += ch;
    else if (in(la, ch))
      left += ch;
    else
      right += ch;
  }
  for (char ch : la)
    if (in(lb, ch) && !in(eq.output, ch)) contracted += ch;
  for (char ch : batch + contracted)
    if (a.shape(static_cast<int>(la.find(ch))) != b.shape(static_cast<int>(lb.find(ch))))
      throw std::runtime_error(std::string("Einsum letter '") + ch +
                               "' has different sizes in the two inputs");
  const int nb = static_cast<int>(batch.size());
  const int nl = static_cast<int>(left.size()), nr = static_cast<int>(right.size());
  mx::array y = a;
  std::string ly;  // letters of y's axes
  if (contracted.empty()) {
    // Nothing is summed across the operands: a broadcast multiply, (batch, left, 1..) x
    // (batch, 1.., right).
    a = to_order(a, la, batch + left, s);
    b = to_order(b, lb, batch + right, s);
    mx::Shape sa = a.shape(), sb = b.shape();
    sa.insert(sa.end(), static_cast<size_t>(nr), 1);
    sb.insert(sb.begin() + nb, static_cast<size_t>(nl), 1);
    y = mx::multiply(mx::reshape(a, sa, s), mx::reshape(b, sb, s), s);
    ly = batch + left + right;
  } else if (left.empty() && right.empty()) {
    // Dot products per batch entry: multiply and sum over the contracted axes.
    a = to_order(a, la, batch + contracted, s);
    b = to_order(b, lb, batch + contracted, s);
    std::vector<int> axes(contracted.size());
    std::iota(axes.begin(), axes.end(), nb);
    y = mx::sum(mx::multiply(a, b, s), axes, false, s);
    ly = batch;
  } else {
    // (batch..., L, C) x (batch..., C, R), each group merged into one axis (1 when empty).
    const int nc = static_cast<int>(contracted.size());
    a = to_order(a, la, batch + left + contracted, s);
    b = to_order(b, lb, batch + contracted + right, s);
    mx::Shape shape(a.shape().begin(), a.shape().begin() + nb + nl);   // batch..., left...
    shape.insert(shape.end(), b.shape().end() - nr, b.shape().end());  // right...
    a = merge_axes(merge_axes(a, nb, nl, s), nb + 1, nc, s);
    b = merge_axes(merge_axes(b, nb, nc, s), nb + 1, nr, s);
    y = mx::reshape(matmul_any(a, b, s), shape, s);
    ly = batch + left + right;
  }
  ctx.bind_output(n, 0, narrowed(to_order(y, ly, eq.output, s), ctx.input(n, 0).dtype(), s));
}

}  // namespace

void register_einsum_ops(OpRegistry& r) {
  r.add("", "Einsum", 12, 1 << 30, claim_einsum, translate_einsum);
}

}  // namespace ortmlx
