// User mistakes throw mantissa::Error (never crash, never return garbage), and the
// message names the op and the shapes or dtypes involved.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mantissa.h>

#include "test_util.h"

namespace mt = mantissa;
using testing::AllOf;
using testing::HasSubstr;

// EXPECT_ERROR(statement, "substring", ...): the statement throws mantissa::Error whose
// message contains every substring.

namespace {
mt::Tensor f32(const mt::Shape& s) { return mt::ones(s); }
mt::Tensor i64(std::vector<int64_t> v) { return mt::from_vector<int64_t>(v); }
}  // namespace

TEST(Errors, ShapeMismatch) {
  EXPECT_ERROR(f32({2, 3}) + f32({4}), HasSubstr("add"), HasSubstr("[2, 3]"), HasSubstr("[4]"));
  EXPECT_ERROR(f32({2, 3}) * f32({2}), HasSubstr("mul"), HasSubstr("[2, 3]"), HasSubstr("[2]"));
  EXPECT_ERROR(f32({2, 3}) / f32({3, 2}), HasSubstr("div"), HasSubstr("[2, 3]"), HasSubstr("[3, 2]"));
  EXPECT_ERROR(mt::where(f32({2}) > 0.0, f32({2}), f32({3})), HasSubstr("where"), HasSubstr("[3]"));
  EXPECT_ERROR(f32({3}).add_(f32({2, 3})), HasSubstr("add_"), HasSubstr("[3]"), HasSubstr("[2, 3]"));
  EXPECT_ERROR(f32({3}).copy_(f32({4})), HasSubstr("copy_"), HasSubstr("[3]"), HasSubstr("[4]"));

  EXPECT_ERROR(mt::matmul(f32({2, 3}), f32({4, 5})), HasSubstr("matmul"), HasSubstr("[2, 3]"), HasSubstr("[4, 5]"));
  EXPECT_ERROR(mt::matmul(f32({3}), f32({4})), HasSubstr("matmul"), HasSubstr("[3]"), HasSubstr("[4]"));
  EXPECT_ERROR(mt::matmul(f32({2, 2, 3}), f32({3, 3, 2})), HasSubstr("matmul"), HasSubstr("[2]"), HasSubstr("[3]"));
  EXPECT_ERROR(mt::matmul(mt::scalar_tensor(1.0), f32({2})), HasSubstr("matmul"), HasSubstr("[]"));

  EXPECT_ERROR(mt::cat({f32({2, 3}), f32({2, 4})}, 0), HasSubstr("cat"), HasSubstr("[2, 3]"), HasSubstr("[2, 4]"));
  EXPECT_ERROR(mt::cat({f32({2, 3}), f32({3})}, 0), HasSubstr("cat"), HasSubstr("[2, 3]"), HasSubstr("[3]"));
  EXPECT_ERROR(mt::cat({}, 0), HasSubstr("cat"));
  EXPECT_ERROR(mt::stack({f32({2}), f32({3})}), HasSubstr("stack"), HasSubstr("[2]"), HasSubstr("[3]"));

  EXPECT_ERROR(f32({2, 3}).view({4}), HasSubstr("view"), HasSubstr("[4]"), HasSubstr("[2, 3]"));
  EXPECT_ERROR(f32({2, 3}).t().view({6}), HasSubstr("view"), HasSubstr("[3, 2]"), HasSubstr("reshape"));
  EXPECT_ERROR(f32({2, 3}).view({-1, -1}), HasSubstr("view"), HasSubstr("[-1, -1]"));
  EXPECT_ERROR(f32({2, 3}).reshape({4, -1}), HasSubstr("reshape"), HasSubstr("[4, -1]"), HasSubstr("[2, 3]"));
  EXPECT_ERROR(f32({2, 3}).expand({3, 3}), HasSubstr("expand"), HasSubstr("[2, 3]"), HasSubstr("[3, 3]"));
  EXPECT_ERROR(f32({2, 3}).permute({0}), HasSubstr("permute"), HasSubstr("[2, 3]"));
  EXPECT_ERROR(f32({2, 3}).permute({0, 0}), HasSubstr("permute"), HasSubstr("repeated"));
  EXPECT_ERROR(f32({2, 3, 4}).t(), HasSubstr("t"), HasSubstr("[2, 3, 4]"));
  EXPECT_ERROR(mt::split(f32({5}), std::vector<int64_t>{2, 2}), HasSubstr("split"), HasSubstr("[5]"));
  EXPECT_ERROR(mt::from_vector<float>({1, 2, 3}, {2, 2}), HasSubstr("from_vector"), HasSubstr("[2, 2]"));
  EXPECT_ERROR(mt::masked_fill(f32({2, 3}), mt::from_vector<bool>({true, false}), 0), HasSubstr("[2, 3]"),
               HasSubstr("[2]"));
}

TEST(Errors, DtypeMismatch) {
  EXPECT_ERROR(mt::matmul(f32({2, 2}), mt::ones({2, 2}, {.dtype = mt::kDouble})), HasSubstr("matmul"),
               HasSubstr("float32"), HasSubstr("float64"));
  EXPECT_ERROR(mt::matmul(mt::ones({2, 2}, {.dtype = mt::kInt64}), mt::ones({2, 2}, {.dtype = mt::kInt64})),
               HasSubstr("matmul"), HasSubstr("int64"));
  EXPECT_ERROR(i64({1, 2}).add_(f32({2})), HasSubstr("add_"), HasSubstr("float32"), HasSubstr("int64"));
  EXPECT_ERROR(i64({1, 2}).mul_(1.5), HasSubstr("mul_"), HasSubstr("float32"), HasSubstr("int64"));
  EXPECT_ERROR(i64({1, 2}).div_(2), HasSubstr("div_"), HasSubstr("int64"));
  EXPECT_ERROR(mt::mean(i64({1, 2})), HasSubstr("mean"), HasSubstr("int64"));
  EXPECT_ERROR(mt::softmax(i64({1, 2}), 0), HasSubstr("softmax"), HasSubstr("int64"));
  EXPECT_ERROR(mt::where(f32({2}), f32({2}), f32({2})), HasSubstr("where"), HasSubstr("float32"));
  EXPECT_ERROR(f32({2}).masked_fill_(i64({1, 0}), 0), HasSubstr("masked_fill"), HasSubstr("int64"));
  EXPECT_ERROR(mt::index_select(f32({3}), 0, f32({1})), HasSubstr("index_select"), HasSubstr("float32"));
  EXPECT_ERROR(mt::one_hot(f32({1})), HasSubstr("one_hot"), HasSubstr("float32"));
  EXPECT_ERROR(mt::nn::functional::embedding(f32({1}), f32({4, 2})), HasSubstr("embedding"), HasSubstr("float32"));
  EXPECT_ERROR(-mt::from_vector<bool>({true}), HasSubstr("neg"), HasSubstr("bool"));
}

TEST(Errors, DimOutOfRange) {
  mt::Tensor x = f32({2, 3});
  EXPECT_ERROR(mt::sum(x, {2}), HasSubstr("sum"), HasSubstr("dimension 2"), HasSubstr("2 dimensions"));
  EXPECT_ERROR(mt::sum(x, {-3}), HasSubstr("sum"), HasSubstr("-3"));
  EXPECT_ERROR(mt::sum(x, {0, 0}), HasSubstr("sum"), HasSubstr("repeated"));
  EXPECT_ERROR(mt::mean(x, {5}), HasSubstr("mean"), HasSubstr("5"));
  EXPECT_ERROR(mt::softmax(x, 2), HasSubstr("softmax"), HasSubstr("dimension 2"));
  EXPECT_ERROR(mt::log_softmax(x, -3), HasSubstr("log_softmax"), HasSubstr("-3"));
  EXPECT_ERROR(x.select(2, 0), HasSubstr("select"), HasSubstr("dimension 2"));
  EXPECT_ERROR(x.transpose(0, 2), HasSubstr("transpose"), HasSubstr("dimension 2"));
  EXPECT_ERROR(x.narrow(3, 0, 1), HasSubstr("narrow"), HasSubstr("dimension 3"));
  EXPECT_ERROR(x.narrow(1, 2, 2), HasSubstr("narrow"), HasSubstr("size 3"), HasSubstr("[2, 3]"));
  EXPECT_ERROR(x.unsqueeze(3), HasSubstr("unsqueeze"), HasSubstr("3"));
  EXPECT_ERROR(x.squeeze(2), HasSubstr("squeeze"), HasSubstr("2"));
  EXPECT_ERROR(x.size(2), HasSubstr("size"), HasSubstr("2"));
  EXPECT_ERROR(mt::cat({x, x}, 2), HasSubstr("cat"), HasSubstr("2"));
  EXPECT_ERROR(mt::argmax(x, 2), HasSubstr("argmax"), HasSubstr("2"));
  EXPECT_ERROR(mt::max(x, -3), HasSubstr("max"), HasSubstr("-3"));
  EXPECT_ERROR(mt::gather(x, 2, i64({0})), HasSubstr("gather"), HasSubstr("2"));
  EXPECT_ERROR(x.flatten(1, 0), HasSubstr("flatten"));
}

TEST(Errors, IndexOutOfRange) {
  mt::Tensor x = f32({3, 4});
  EXPECT_ERROR(x.select(0, 3), HasSubstr("select"), HasSubstr("index 3"), HasSubstr("size 3"), HasSubstr("[3, 4]"));
  EXPECT_ERROR(x.select(1, -5), HasSubstr("select"), HasSubstr("-5"), HasSubstr("size 4"));
  EXPECT_ERROR(mt::index_select(x, 0, i64({0, 7})), HasSubstr("index_select"), HasSubstr("7"), HasSubstr("size 3"));
  EXPECT_ERROR(mt::index_select(x, 1, i64({-1})), HasSubstr("index_select"), HasSubstr("-1"));
  EXPECT_ERROR(mt::gather(x, 1, mt::from_vector<int64_t>({0, 1, 2, 4, 0, 0}, {3, 2})), HasSubstr("gather"),
               HasSubstr("4"), HasSubstr("size 4"));
  EXPECT_ERROR(mt::gather(x, 1, i64({0})), HasSubstr("gather"), HasSubstr("[3, 4]"), HasSubstr("[1]"));
  EXPECT_ERROR(mt::scatter_add(x, 0, mt::from_vector<int64_t>({3, 0, 0, 0}, {1, 4}), f32({1, 4})),
               HasSubstr("scatter_add"), HasSubstr("3"));
  EXPECT_ERROR(mt::nn::functional::embedding(i64({1, 5}), f32({5, 2})), HasSubstr("embedding"), HasSubstr("5"));
  EXPECT_ERROR(mt::nn::functional::embedding(i64({-1}), f32({5, 2})), HasSubstr("embedding"), HasSubstr("-1"));
  EXPECT_ERROR(mt::one_hot(i64({0, 3}), 3), HasSubstr("one_hot"), HasSubstr("3"));
  EXPECT_ERROR(mt::one_hot(i64({-1}), 3), HasSubstr("one_hot"), HasSubstr("-1"));
}

TEST(Errors, ScalarAndFactoryMisuse) {
  EXPECT_ERROR(f32({2, 3}).item<float>(), HasSubstr("item"), HasSubstr("6"), HasSubstr("[2, 3]"));
  EXPECT_ERROR(f32({0}).item<float>(), HasSubstr("item"), HasSubstr("0"));
  EXPECT_ERROR(mt::from_vector<bool>({true, false}).item<bool>(), HasSubstr("item"), HasSubstr("2"));
  EXPECT_ERROR(mt::empty({2, -1}), HasSubstr("negative"), HasSubstr("[2, -1]"));
  EXPECT_ERROR(mt::arange(0, 5, 0), HasSubstr("arange"), HasSubstr("step"));
  EXPECT_ERROR(mt::arange(0, 5, -1), HasSubstr("arange"));
  EXPECT_ERROR(mt::linspace(0, 1, -1), HasSubstr("linspace"), HasSubstr("-1"));
  EXPECT_ERROR(mt::eye(-2), HasSubstr("eye"), HasSubstr("-2"));
  EXPECT_ERROR(mt::randint(5, 5, {2}), HasSubstr("randint"), HasSubstr("5"));
  EXPECT_ERROR(mt::bernoulli({2}, 1.5), HasSubstr("bernoulli"), HasSubstr("1.5"));
  EXPECT_ERROR(mt::randperm(-1), HasSubstr("randperm"));
  EXPECT_ERROR(f32({3}).slice(0, 0, 3, 0), HasSubstr("slice"), HasSubstr("step"));
  EXPECT_ERROR(mt::chunk(f32({3}), 0), HasSubstr("chunk"));
  EXPECT_ERROR(mt::amax(f32({0})), HasSubstr("max"), HasSubstr("[0]"));
  EXPECT_ERROR(mt::argmin(f32({2, 0}), 1), HasSubstr("argmin"), HasSubstr("[2, 0]"));
}

TEST(Errors, AutogradMisuse) {
  EXPECT_ERROR(i64({1, 2}).requires_grad_(), HasSubstr("requires_grad_"), HasSubstr("int64"));
  EXPECT_ERROR(mt::zeros({2}, {.dtype = mt::kInt32, .requires_grad = true}), HasSubstr("requires_grad_"),
               HasSubstr("int32"));
  mt::Tensor w = mt::ones({2, 2}, {.requires_grad = true});
  mt::Tensor y = w * 2;
  EXPECT_ERROR(y.backward(), HasSubstr("backward"), HasSubstr("[2, 2]"));
  EXPECT_ERROR(y.backward(f32({3})), HasSubstr("backward"), HasSubstr("[3]"), HasSubstr("[2, 2]"));
  EXPECT_ERROR(f32({1}).backward(), HasSubstr("backward"), HasSubstr("does not require grad"));
  EXPECT_ERROR(y.requires_grad_(false), HasSubstr("requires_grad_"), HasSubstr("leaf"));
  EXPECT_ERROR(w.set_grad(f32({3})), HasSubstr("set_grad"), HasSubstr("[3]"), HasSubstr("[2, 2]"));
  EXPECT_ERROR(f32({2}).register_hook([](const mt::Tensor& g) { return g; }), HasSubstr("register_hook"));
  EXPECT_ERROR(f32({2}).retain_grad(), HasSubstr("retain_grad"));
  EXPECT_ERROR(mt::autograd::grad({y.sum()}, {f32({2})}), HasSubstr("grad"), HasSubstr("does not require grad"));
}

TEST(Errors, UndefinedTensor) {
  mt::Tensor u;
  mt::Tensor x = f32({2});
  EXPECT_FALSE(u.defined());
  EXPECT_ERROR(u.sizes(), HasSubstr("undefined"));
  EXPECT_ERROR(u.numel(), HasSubstr("undefined"));
  EXPECT_ERROR(u.dtype(), HasSubstr("undefined"));
  EXPECT_ERROR(u.item<float>(), HasSubstr("undefined"));
  EXPECT_ERROR(u.to_vector<float>(), HasSubstr("undefined"));
  EXPECT_ERROR(u.raw_data(), HasSubstr("undefined"));
  EXPECT_ERROR(u.sum(), HasSubstr("undefined"));
  EXPECT_ERROR(u.clone(), HasSubstr("undefined"));
  EXPECT_ERROR(u.view({1}), HasSubstr("undefined"));
  EXPECT_ERROR(u.to(mt::kDouble), HasSubstr("undefined"));
  EXPECT_ERROR(u + x, HasSubstr("undefined"));
  EXPECT_ERROR(x * u, HasSubstr("undefined"));
  EXPECT_ERROR(u * 2.0, HasSubstr("undefined"));
  EXPECT_ERROR(mt::exp(u), HasSubstr("undefined"));
  EXPECT_ERROR(mt::matmul(u, x), HasSubstr("undefined"));
  EXPECT_ERROR(mt::cat({x, u}), HasSubstr("undefined"));
  EXPECT_ERROR(x.add_(u), HasSubstr("undefined"));
  EXPECT_ERROR(x.copy_(u), HasSubstr("undefined"));
  EXPECT_ERROR(u.fill_(1), HasSubstr("undefined"));
  EXPECT_ERROR(u.requires_grad_(), HasSubstr("undefined"));
  EXPECT_ERROR(u.backward(), HasSubstr("backward"));
  EXPECT_FALSE(u.grad().defined());
  EXPECT_FALSE(u.requires_grad());
}
