// The differentiable tensor ops, each defined once in autograd/ops_*.cpp (shape/dtype inference,
// autocast, kernel dispatch, backward formula), with its autocast category declared there or,
// for an elementwise op, in its line of core/elementwise_math.h (docs/adding-an-op.md).
#pragma once
#include <optional>
#include <vector>

#include "autograd/node.h"
#include "core/elementwise_math.h"  // MT_UNARY_OPS
#include "core/random.h"
#include "core/tensor.h"

namespace mantissa {

// --- unary elementwise ---
// One function per entry of MT_UNARY_OPS (core/elementwise_math.h) called as name(x): exp(x),
// sigmoid(x), mish(x), ... (what each computes: its functor there, as torch's op of that name).
#define MT_UNARY_DECLARATION(Enum, name, F, domain, policy, gradcheck, op) \
  MT_UNARY_IF_ONE_TENSOR(op, Tensor name(const Tensor& x);)
MT_UNARY_OPS(MT_UNARY_DECLARATION)
#undef MT_UNARY_DECLARATION
// The entries with more arguments (Args):
// approximate: "none" (erf form) or "tanh"
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
// log(1 + exp(beta x)) / beta, and x where beta x > threshold (torch.nn.functional.softplus).
Tensor softplus(const Tensor& x, double beta = 1, double threshold = 20);
Tensor pow(const Tensor& x, const Scalar& exponent);
Tensor pow(const Tensor& x, const Tensor& exponent);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);

// --- binary elementwise (broadcasting, PyTorch type promotion) ---
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);

Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Scalar& b);
Tensor operator!=(const Tensor& a, const Scalar& b);
Tensor operator<(const Tensor& a, const Scalar& b);
Tensor operator<=(const Tensor& a, const Scalar& b);
Tensor operator>(const Tensor& a, const Scalar& b);
Tensor operator>=(const Tensor& a, const Scalar& b);

// A 0-dim tensor holding `s`, typed to combine with `like` as a Python scalar would.
Tensor wrap_scalar(const Scalar& s, const Tensor& like);

// --- reductions (dims empty = all dims) ---
Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor amax(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
struct ValuesIndices {
  Tensor values, indices;
};
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x);  // over all elements
Tensor min(const Tensor& x);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
// correction = 1 is the unbiased estimator (torch default)
Tensor var(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// Sums `x` down to `shape` (the reverse of broadcasting); used by backward formulas.
Tensor sum_to(const Tensor& x, const Shape& shape);

// --- linear algebra ---
// 1-D/2-D/batched with broadcasting batch dims, as torch.matmul.
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);   // matmul of 2-D matrices only
Tensor bmm(const Tensor& a, const Tensor& b);  // matmul of 3-D batches [B, n, m] x [B, m, p] only

// --- shape and indexing ---
Tensor cat(const std::vector<Tensor>& ts, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& ts, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
// The selects x.select(dim, i) for every i (torch.unbind).
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// Returns x with src added at `index` along dim (out-of-place scatter_add).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);

// The lower (tril) or upper (triu) triangle of the last two dims; the rest zeroed. diagonal
// 0 is the main diagonal, > 0 above it, < 0 below (as torch.tril / torch.triu).
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);

// --- attention (autograd/ops_attention.cpp) ---
struct AttentionOptions {
  // Bool (true = may attend) or floating (added to the scores), broadcastable to [..., L, S].
  // It receives no gradient.
  Tensor attn_mask{};
  // Query i sees keys j <= i only; no L x S mask is built.
  bool is_causal = false;
  // Dropout on the attention probabilities (pass 0 outside training).
  double dropout_p = 0.0;
  // The factor of q . k; default 1 / sqrt(E).
  std::optional<double> scale{};
};
// softmax(q k^T * scale + mask) v as one op with its own backward, for q [..., L, E],
// k [..., S, E], v [..., S, Ev] with equal leading dims -> [..., L, Ev]. Saves the per-row
// log-sum-exp (not the L x S probabilities) and recomputes the probabilities in backward.
// Under autocast the GEMMs run in fp16/bf16 and the softmax statistics in fp32. A query
// whose keys are all masked gets a zero output (and zero gradients).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& opts = {});

// Zeros of `shape` with `g` written into the strided window (sizes, strides, offset) of a
// contiguous layout: the backward of narrow/slice/select.
Tensor view_scatter(const Tensor& g, const Shape& shape, const Shape& sizes, const Shape& strides, int64_t offset);

// ==== cumulative ops, norms, logical reductions, sorting (ops_cumulative.cpp, ops_norm.cpp,
// ops_sort.cpp) ====
// Inclusive running sum / product along dim (integer and bool inputs give int64, as torch).
// cumprod's gradient is exact where x has zeros.
Tensor cumsum(const Tensor& x, int64_t dim);
Tensor cumprod(const Tensor& x, int64_t dim);
// torch.norm: p = 2 (the default, also "fro"), 1, +inf (max |x|), 0 (count of nonzeros) or any
// p > 0, over dims (empty: all). The 2-norm's gradient is 0 where the norm is 0.
Tensor norm(const Tensor& x, double p = 2, const Shape& dims = {}, bool keepdim = false);
Tensor norm(const Tensor& x, const std::string& p, const Shape& dims = {}, bool keepdim = false);
// Whether every / any element (over dims; empty: all) is nonzero; bool (uint8 for uint8 input).
Tensor all(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor any(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
// Sorted values (differentiable) and their int64 source indices along dim; NaN sorts above
// every number. The sort is always stable (`stable` is accepted for torch's signature).
ValuesIndices sort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
// The k largest (or smallest) values along dim, sorted, with their indices.
ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);
// ==== end of cumulative / norm / sort block ====

// ==== activations (ops_activation.cpp; elementwise list entries in core/elementwise_math.h) ====
// x where x > 0, else negative_slope x.
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
// x where x > 0, else alpha (exp(x) - 1).
Tensor elu(const Tensor& x, double alpha = 1.0);
// x clamped to [min_val, max_val]; the gradient is 0 outside the open interval.
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0);
// x where x > 0, else weight x; weight [1] or [C] along dim 1 (dim 0 of a 1-D input).
Tensor prelu(const Tensor& x, const Tensor& weight);
// ==== end of activations ====

}  // namespace mantissa
