// index_select (and so the embedding forward) copying whole rows: rows of 256 bytes or more are
// fetched a few rows ahead on the CPU (core/cpu/index.cpp), so these cases check every row of
// short and long index lists (the look-ahead's end inside a thread's range), rows past the
// 4 KiB that are fetched, repeats, NaN bits, integer and bf16 tables, a middle dim, a
// non-contiguous source, an empty and a 0-dim index, element by element against the table.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace mt = mantissa;
namespace F = mt::nn::functional;

namespace {

// out[..., n, ...] must equal table[..., ids[n], ...] along `dim` of a [outer, num, D] view.
void expect_rows(const mt::Tensor& table, const mt::Tensor& out, const std::vector<int64_t>& ids, int64_t outer,
                 int64_t num, int64_t D) {
  const std::vector<double> w = table.contiguous().to(mt::kFloat64).to_vector<double>();
  const std::vector<double> y = out.contiguous().to(mt::kFloat64).to_vector<double>();
  ASSERT_EQ(y.size(), size_t(outer) * ids.size() * size_t(D));
  int64_t wrong = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t n = 0; n < ids.size(); ++n)
      for (int64_t d = 0; d < D; ++d) {
        const double want = w[size_t((o * num + ids[n]) * D + d)];
        const double got = y[(size_t(o) * ids.size() + n) * size_t(D) + size_t(d)];
        wrong += std::isnan(want) ? !std::isnan(got) : got != want;
      }
  EXPECT_EQ(wrong, 0) << "dtype " << mt::dtype_name(out.dtype()) << ", " << ids.size() << " rows of " << D;
}

std::vector<int64_t> random_ids(int64_t count, int64_t num) {
  const mt::Tensor t = mt::randint(0, num, {count});
  return t.to_vector<int64_t>();
}

}  // namespace

TEST(IndexSelectRows, WideRowsInAnyOrderMatchTheTable) {
  mt::manual_seed(11);
  const int64_t num = 37;
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16, mt::kFloat64, mt::kInt64})
    for (int64_t D : {int64_t(3), int64_t(96), int64_t(160), int64_t(1500)}) {  // 12 B to 12 KiB rows
      mt::Tensor table = (mt::randn({num, D}) * 100).to(dt);
      if (mt::is_floating(dt)) {  // NaN and inf rows are copied as they are
        table.select(0, 5).fill_(std::numeric_limits<double>::quiet_NaN());
        table.select(0, 6).fill_(-std::numeric_limits<double>::infinity());
      }
      for (int64_t count : {int64_t(1), int64_t(3), int64_t(5), int64_t(200)}) {
        std::vector<int64_t> ids = random_ids(count, num);
        ids[0] = 5;
        if (count > 2) ids[size_t(count) - 1] = 6;
        expect_rows(table, mt::index_select(table, 0, mt::from_vector<int64_t>(ids)), ids, 1, num, D);
      }
      const std::vector<int64_t> reversed = {36, 35, 30, 6, 5, 5, 5, 0};
      expect_rows(table, mt::index_select(table, 0, mt::from_vector<int64_t>(reversed)), reversed, 1, num, D);
    }
}

TEST(IndexSelectRows, MiddleDimNonContiguousSourceEmptyAndZeroDimIndex) {
  mt::manual_seed(12);
  const int64_t outer = 3, num = 11, D = 128;  // rows of 512 bytes in fp32
  const mt::Tensor x = mt::randn({outer, num, D});
  const std::vector<int64_t> ids = random_ids(40, num);
  expect_rows(x, mt::index_select(x, 1, mt::from_vector<int64_t>(ids)), ids, outer, num, D);
  // A transposed view as the source: the rows of its contiguous copy.
  const mt::Tensor t = mt::randn({D, num}).t();
  ASSERT_FALSE(t.is_contiguous());
  expect_rows(t, mt::index_select(t, 0, mt::from_vector<int64_t>(ids)), ids, 1, num, D);
  // No rows, and a 0-dim index (the embedding of one token: a row of D).
  const mt::Tensor none = mt::index_select(x, 1, mt::from_vector<int64_t>({}));
  EXPECT_EQ(none.sizes(), (mt::Shape{outer, 0, D}));
  const mt::Tensor w = x.select(0, 0);
  const mt::Tensor one = F::embedding(mt::full({}, 4, {.dtype = mt::kInt64}), w);
  EXPECT_EQ(one.sizes(), (mt::Shape{D}));
  expect_rows(w, one.reshape({1, D}), {4}, 1, num, D);
}
