// The cuda backend's device collectives (NCCL, src/backends/cuda/nccl_collectives.cpp) on one
// rank, on a GPU: what the device image allows (one GPU: NCCL refuses two ranks on one device,
// and the image has no MPI launcher). A sum over one rank is the values themselves, so the scale
// shows that the collective and its scaling ran, in place, behind the stream's earlier work.
// Several ranks are tested on the CPU through GradientSync with a fake (tests/unit).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "support/mirrored_values.hpp"

namespace crest {
namespace {

template <typename T>
std::vector<T> through_one_rank(Backend& cuda, DeviceCollectives& nccl, const std::vector<T>& in,
                                DType dtype, double scale) {
  MemoryResource& memory = cuda.memory();
  Buffer values(in.size() * sizeof(T), 256, memory);
  memory.copy_to_device(values.data(), in.data(), in.size() * sizeof(T));
  nccl.allreduce_sum(values.data(), in.size(), dtype, scale);
  nccl.wait(60, "the test's allreduce");
  std::vector<T> out(in.size());
  memory.copy_to_host(out.data(), values.data(), out.size() * sizeof(T));
  return out;
}

TEST(CudaNccl, OneRankCollectivesReduceInPlace) {
  CREST_SKIP_WITHOUT_A_CUDA_DEVICE();
  auto cuda = make_backend("cuda");
  const Support s = cuda->supports_device_collectives();
  ASSERT_TRUE(s) << s.reason;
  const auto nccl = cuda->device_collectives(0, 1, [](void*, size_t) {});
  ASSERT_NE(nccl, nullptr);
  EXPECT_EQ(nccl->name(), "nccl");
  std::vector<float> f(1000);
  for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(i) - 300.f;
  const std::vector<float> half_of = through_one_rank(*cuda, *nccl, f, DType::f32, 0.5);
  for (size_t i = 0; i < f.size(); ++i) ASSERT_EQ(half_of[i], 0.5f * f[i]) << i;
  const std::vector<double> d(f.begin(), f.end());
  const std::vector<double> quarter_of = through_one_rank(*cuda, *nccl, d, DType::f64, 0.25);
  for (size_t i = 0; i < d.size(); ++i) ASSERT_EQ(quarter_of[i], 0.25 * d[i]) << i;
  // 16-bit codes (compressed buckets) are summed as they are: one rank's sum is the code itself.
  std::vector<uint16_t> codes(513);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint16_t>(0x3f80 + i);
  EXPECT_EQ(through_one_rank(*cuda, *nccl, codes, DType::bf16, 1.0), codes);
}

}  // namespace
}  // namespace crest
