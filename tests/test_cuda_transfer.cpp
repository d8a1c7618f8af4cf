// Host-to-GPU transfers: pinned host tensors and a DataLoader that delivers batches on the
// GPU (uploaded by its worker thread from pinned memory). Without a GPU every test here
// reports itself skipped.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <vector>

#include "gpu_test.h"

namespace mt = mantissa;
namespace md = mantissa::data;

namespace {

const mt::Device kGpu = mt::Device::cuda(0);

TEST(CudaTransfer, PinnedUploadMatchesPageableUpload) {
  REQUIRE_GPU();
  mt::manual_seed(3);
  mt::Tensor x = mt::randn({257, 33});
  mt::Tensor pinned = x.pin_memory();
  ASSERT_TRUE(pinned.is_pinned());
  // Several uploads from freed-and-reused pinned blocks must each see their own bytes.
  for (int i = 0; i < 4; ++i) {
    mt::Tensor src = (x + double(i)).pin_memory();
    mt::Tensor on_gpu = src.to(kGpu);
    src = mt::Tensor();  // the pinned block returns to the cache while the copy may still run
    EXPECT_EQ(on_gpu.to(mt::Device::cpu()).to_vector<float>(), (x + double(i)).to_vector<float>());
  }
  EXPECT_EQ(pinned.to(kGpu).to(mt::Device::cpu()).to_vector<float>(), x.to_vector<float>());
}

TEST(CudaTransfer, DataLoaderDeliversBatchesOnTheGpu) {
  REQUIRE_GPU();
  mt::Tensor data = mt::arange(0, 40, 1, {.dtype = mt::kFloat32}).reshape({10, 4});
  mt::Tensor labels = mt::arange(10);
  for (bool pin : {true, false}) {
    md::DataLoader loader(md::TensorDataset(data, labels), {.batch_size = 4, .device = kGpu, .pin_memory = pin});
    int64_t row = 0;
    for (auto& [x, y] : loader) {
      ASSERT_EQ(x.device(), kGpu);
      ASSERT_EQ(y.device(), kGpu);
      const int64_t n = x.size(0);
      EXPECT_EQ(x.to(mt::Device::cpu()).to_vector<float>(), data.narrow(0, row, n).contiguous().to_vector<float>());
      EXPECT_EQ(y.to(mt::Device::cpu()).to_vector<int64_t>(),
                labels.narrow(0, row, n).contiguous().to_vector<int64_t>());
      row += n;
    }
    EXPECT_EQ(row, 10);
  }
}

}  // namespace
