// Every registered backend's memory resource and stream, the 16-bit narrowing primitives against
// the host conversions of crest/core, and the per-descriptor supports() queries.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/core/bf16.hpp"
#include "crest/core/error.hpp"
#include "crest/core/fp16.hpp"
#include "crest/core/host_staging.hpp"
#include "support/counting_backend.hpp"
#include "support/host_backends.hpp"

namespace crest {
namespace {

class OnEveryBackend : public ::testing::TestWithParam<std::string> {};

std::vector<unsigned char> to_host(MemoryResource& m, const void* p, size_t bytes) {
  std::vector<unsigned char> out(bytes, 0xee);
  m.copy_to_host(out.data(), p, bytes);
  return out;
}

// Small (heap) and large (mmap) blocks: zeroed, aligned, and bytes survive every copy.
TEST_P(OnEveryBackend, MemoryRoundTrip) {
  auto backend = make_backend(GetParam());
  MemoryResource& m = backend->memory();
  for (size_t bytes : {size_t{1000}, size_t{3} << 20}) {
    void* a = m.allocate(bytes, 256);
    void* b = m.allocate(bytes, 256);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 256, 0u);
    EXPECT_EQ(to_host(m, a, bytes), std::vector<unsigned char>(bytes, 0));
    m.memset(a, 0x5a, bytes);
    EXPECT_EQ(to_host(m, a, bytes), std::vector<unsigned char>(bytes, 0x5a));
    std::vector<unsigned char> pattern(bytes);
    for (size_t i = 0; i < bytes; ++i) pattern[i] = static_cast<unsigned char>(i * 7 + 3);
    m.copy_to_device(a, pattern.data(), bytes);
    m.copy(b, a, bytes);
    backend->stream().synchronize();
    EXPECT_EQ(to_host(m, b, bytes), pattern);
    m.deallocate(a, bytes);
    m.deallocate(b, bytes);
  }
  EXPECT_EQ(m.allocate(0, 256), nullptr);
  m.deallocate(nullptr, 0);
  EXPECT_THROW(m.allocate(64, 3), Error);
}

TEST_P(OnEveryBackend, BuffersComeFromTheResourceAsked) {
  auto backend = make_backend(GetParam());
  Buffer b(4096, 256, backend->memory());
  EXPECT_EQ(&b.memory(), &backend->memory());
  Buffer moved = std::move(b);
  EXPECT_EQ(&moved.memory(), &backend->memory());
  // The moved-from buffer owns nothing, so its destructor frees nothing twice.
  EXPECT_EQ(b.data(), nullptr);  // NOLINT(bugprone-use-after-move)
}

// Values that exercise every rounding rule: ties to even, the largest finite values and what
// rounds past them, subnormals, signed zeros, infinities and NaN.
std::vector<float> narrowing_cases() {
  std::vector<float> v = {0.f,
                          -0.f,
                          1.f,
                          -1.f,
                          65504.f,
                          65519.f,
                          65520.f,
                          -65520.f,
                          1e-8f,
                          6e-8f,
                          3e-8f,
                          1e-40f,
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          3.14159265f};
  // bf16 ties: 0x3f808000 lies halfway between 0x3f80 and 0x3f81 (rounds to even 0x3f80),
  // 0x3f818000 halfway between 0x3f81 and 0x3f82 (rounds up to 0x3f82); fp16 ties likewise.
  for (uint32_t bits : {0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu, 0x3f801000u,
                        0x3f803000u, 0x7f7fffffu, 0x00000001u, 0x807fffffu})
    v.push_back(std::bit_cast<float>(bits));
  std::mt19937 g(7);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  for (int i = 0; i < 5000; ++i) v.push_back(std::ldexp(u(g), static_cast<int>(g() % 60) - 30));
  return v;
}

uint16_t host_code(float v, DType to) {
  return to == DType::bf16 ? float_to_bf16(v) : float_to_fp16(v);
}

TEST_P(OnEveryBackend, NarrowMatchesTheHostConversions) {
  auto backend = make_backend(GetParam());
  auto vec = backend->vector_ops(DType::f32);
  const std::vector<float> x = narrowing_cases();
  for (DType to : {DType::bf16, DType::f16})
    for (float scale : {1.f, 0.25f, 1.f / 3.f}) {
      std::vector<uint16_t> got(x.size());
      const double largest = vec->narrow(x.data(), scale, got.data(), x.size(), to);
      float expected_largest = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const float v = x[i] * scale;
        if (!std::isnan(v)) expected_largest = std::max(expected_largest, std::abs(v));
        const uint16_t want = host_code(v, to);
        if (std::isnan(v))  // any NaN code will do; it must stay NaN
          EXPECT_TRUE(
              std::isnan(to == DType::bf16 ? bf16_to_float(got[i]) : fp16_to_float(got[i])));
        else
          ASSERT_EQ(got[i], want) << dtype_name(to) << " of " << v << " (element " << i << ")";
      }
      EXPECT_EQ(largest, static_cast<double>(expected_largest));
    }
}

TEST_P(OnEveryBackend, WidenIsExactForEveryCode) {
  auto backend = make_backend(GetParam());
  auto vec = backend->vector_ops(DType::f32);
  std::vector<uint16_t> codes(65536);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint16_t>(i);
  for (DType from : {DType::bf16, DType::f16}) {
    std::vector<float> got(codes.size());
    vec->widen(codes.data(), from, got.data(), codes.size());
    for (size_t i = 0; i < codes.size(); ++i) {
      const float want = from == DType::bf16 ? bf16_to_float(codes[i]) : fp16_to_float(codes[i]);
      if (std::isnan(want))
        ASSERT_TRUE(std::isnan(got[i]));
      else
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want)) << i;
    }
  }
}

TEST_P(OnEveryBackend, NarrowRefusesWhatIsNotA16BitFloat) {
  auto backend = make_backend(GetParam());
  auto vec = backend->vector_ops(DType::f32);
  float x = 1;
  uint16_t out = 0;
  EXPECT_THROW(vec->narrow(&x, 1, &out, 1, DType::f32), Error);
  EXPECT_THROW(vec->widen(&out, DType::i16, &x, 1), Error);
}

INSTANTIATE_TEST_SUITE_P(Backends, OnEveryBackend,
                         ::testing::ValuesIn(crest::test::host_backend_names()),
                         [](const auto& p) { return p.param; });

TEST(Narrow, ReferenceNarrowsFromDouble) {
  auto vec = make_backend("reference")->vector_ops(DType::f64);
  const double x[3] = {1.0, -65520.0, 0.1};
  uint16_t out[3];
  EXPECT_EQ(vec->narrow(x, 1.0, out, 3, DType::f16), 65520.0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[i], float_to_fp16(static_cast<float>(x[i])));
}

TEST(Supports, ReferenceCannotReadBlockedFormats) {
  auto ref = make_backend("reference");
  MemFormat blocked = plain_format(Shape{2, 16, 4, 4}, DType::f32);
  blocked.layout = Layout::blocked;
  const Support s = ref->supports(EltwiseDesc{EltwiseKind::relu}, blocked);
  EXPECT_FALSE(s);
  EXPECT_NE(s.reason.find("blocked"), std::string::npos) << s.reason;
  EXPECT_TRUE(ref->supports(EltwiseDesc{EltwiseKind::relu}, plain_format(Shape{2, 3}, DType::f64)));
  EXPECT_FALSE(ref->supports(DenseDesc{1, 2, 3, true, DType::i32}));
}

TEST(Supports, OneDnnRefusesDoubleWithAReasonAndTheFactoryRaisesIt) {
  const auto names = crest::test::host_backend_names();
  if (std::find(names.begin(), names.end(), "onednn") == names.end())
    GTEST_SKIP() << "built without oneDNN";
  auto dnn = make_backend("onednn");
  ConvDesc d;
  d.dtype = DType::f64;
  const Support s = dnn->supports(d);
  EXPECT_FALSE(s);
  EXPECT_NE(s.reason.find("f64"), std::string::npos) << s.reason;
  d.dtype = DType::f32;
  EXPECT_TRUE(dnn->supports(d));
  EXPECT_FALSE(dnn->supports(EltwiseDesc{EltwiseKind::leaky_relu, -0.5f},
                             plain_format(Shape{2, 3}, DType::f32)));
  try {
    dnn->dense(DenseDesc{1, 2, 3, true, DType::f64});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::usage);
    EXPECT_NE(std::string(e.what()).find("backend 'onednn' cannot create a dense kernel: f64"),
              std::string::npos)
        << e.what();
  }
}

// On host memory the staging is the memory itself; elsewhere a copy that commit() writes back.
TEST(HostStaging, CopiesOnlyWhereTheMemoryIsNotHostMemory) {
  for (bool device : {false, true}) {
    test::CountingMemory m(device);
    void* p = m.allocate(64, 64);
    {
      HostStaging w(m, p, 64, /*fetch=*/false);
      EXPECT_EQ(w.data() == p, !device);
      std::memset(w.data(), 7, 64);
      w.commit();
    }
    const HostStaging r(m, static_cast<const void*>(p), 64);
    EXPECT_EQ(static_cast<const unsigned char*>(r.data())[63], 7);
    EXPECT_EQ(m.copies_to_device, device ? 1 : 0);
    EXPECT_EQ(m.copies_to_host, device ? 1 : 0);
    m.deallocate(p, 64);
  }
}

}  // namespace
}  // namespace crest
