// crest's weight repacking (src/backends/onednn/weight_repack.hpp) gives exactly what oneDNN's
// reorder gives, for each blocked weight layout the convolution kernels pick, both directions,
// channel counts that leave edge tiles, and a window of a larger tensor; and it declines the
// pairs it does not cover.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "crest/core/bf16.hpp"
#include "onednn/weight_repack.hpp"

namespace crest {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// Values with a pattern in every bit position, none subnormal (oneDNN's bf16 conversion on
// AVX512-BF16 hardware flushes those; crest's keeps them), some halfway cases for the rounding.
std::vector<float> pattern(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = (static_cast<float>(static_cast<int>(i * 7919 % 2003)) - 1001.f) / 37.f +
           (i % 5 == 0 ? 1.0f / 256.f : 0.f);
  return v;
}

// `bytes` that end where an inaccessible page begins: reading or writing past the end crashes
// the test instead of going unnoticed (a 2-row tile once loaded 16 rows).
class Guarded {
 public:
  explicit Guarded(size_t bytes) {
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t body = (bytes + page - 1) / page * page;
    length_ = body + page;
    base_ = static_cast<unsigned char*>(
        mmap(nullptr, length_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    EXPECT_NE(base_, MAP_FAILED);
    mprotect(base_ + body, page, PROT_NONE);
    data_ = base_ + body - bytes;
  }
  ~Guarded() { munmap(base_, length_); }
  Guarded(const Guarded&) = delete;
  Guarded& operator=(const Guarded&) = delete;
  unsigned char* data() { return data_; }

 private:
  unsigned char *base_ = nullptr, *data_ = nullptr;
  size_t length_ = 0;
};

// `from` -> `to` by oneDNN's reorder and by WeightRepack; the destination buffers start as
// different garbage, so padding must be written too. WeightRepack reads and writes buffers that
// end at an inaccessible page.
// `source` is the tensor `from` lies in (a window's whole tensor; get_size() leaves out the
// window's offset).
void expect_same_as_onednn(const memory::desc& from, const memory::desc& to,
                           const std::string& what, const memory::desc& source) {
  SCOPED_TRACE(what);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  const auto repack = onednn::WeightRepack::plan(from, to);
  ASSERT_TRUE(repack.has_value()) << "not covered";
  const std::vector<float> src = pattern(source.get_size() / sizeof(float));
  std::vector<unsigned char> want(to.get_size(), 0xAB), got(to.get_size(), 0xCD);
  dnnl::memory a(from, eng, const_cast<float*>(src.data())), b(to, eng, want.data());
  dnnl::reorder(a, b).execute(s, a, b);
  s.wait();
  Guarded src_end(src.size() * sizeof(float)), got_end(got.size());
  std::memcpy(src_end.data(), src.data(), src.size() * sizeof(float));
  std::memcpy(got_end.data(), got.data(), got.size());
  repack->run(src_end.data(), got_end.data());
  std::memcpy(got.data(), got_end.data(), got.size());
  // Padding: oneDNN zeroes it; compare every byte.
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i] && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << "first differing byte " << first << " of " << got.size();
}
void expect_same_as_onednn(const memory::desc& from, const memory::desc& to,
                           const std::string& what) {
  expect_same_as_onednn(from, to, what, from);
}

TEST(OneDnnWeightRepack, PlainToEveryBlockedLayoutMatchesOneDnn) {
  const tag blocked[] = {tag::ABcd8b16a2b, tag::BAcd8a16b2a, tag::ABcd16b16a, tag::BAcd16a16b,
                         tag::AcdB64a2b,   tag::BcdA32b2a,   tag::Acdb32a,    tag::ABcd8a16b2a,
                         tag::BcdA64b2a,   tag::ABcd16a16b};
  // 32 x 64 fills the 16-blocks; 20 x 35 leaves edge tiles in both channel dims; 128 x 64 x 3 x 3
  // fills the 64-row tiles of AcdB64a2b, which go through a panel; 64 x 64 x 1 x 1 fills the
  // 2-row tiles of BcdA32b2a and BcdA64b2a.
  for (const memory::dims& dims :
       {memory::dims{32, 64, 3, 3}, memory::dims{20, 35, 3, 1}, memory::dims{128, 16, 1, 1},
        memory::dims{128, 64, 3, 3}, memory::dims{64, 64, 1, 1}}) {
    for (tag t : blocked)
      for (dt type : {dt::f32, dt::bf16}) {
        const std::string what = "dims " + std::to_string(dims[0]) + "x" + std::to_string(dims[1]) +
                                 " tag " + std::to_string(static_cast<int>(t)) +
                                 (type == dt::bf16 ? " bf16" : " f32");
        expect_same_as_onednn(memory::desc(dims, dt::f32, tag::abcd), memory::desc(dims, type, t),
                              what);
      }
  }
}

TEST(OneDnnWeightRepack, BlockedGradientsBackToPlainMatchOneDnn) {
  const tag blocked[] = {tag::ABcd16b16a, tag::BAcd16a16b, tag::Acdb32a, tag::ABcd16a16b};
  for (const memory::dims& dims : {memory::dims{32, 64, 3, 3}, memory::dims{20, 35, 1, 3},
                                   memory::dims{48, 32, 1, 1}, memory::dims{40, 56, 1, 1}})
    for (tag t : blocked)
      expect_same_as_onednn(memory::desc(dims, dt::f32, t), memory::desc(dims, dt::f32, tag::abcd),
                            "to plain, tag " + std::to_string(static_cast<int>(t)));
  // 3-D convolution weights and grouped (depthwise) 2-D weights.
  const memory::dims dhw{32, 16, 3, 3, 3};
  expect_same_as_onednn(memory::desc(dhw, dt::f32, tag::abcde),
                        memory::desc(dhw, dt::bf16, tag::ABcde8b16a2b), "3-D to blocked");
  expect_same_as_onednn(memory::desc(dhw, dt::f32, tag::ABcde16b16a),
                        memory::desc(dhw, dt::f32, tag::abcde), "3-D to plain");
  const memory::dims grouped{48, 1, 1, 3, 3};
  expect_same_as_onednn(memory::desc(grouped, dt::f32, tag::abcde),
                        memory::desc(grouped, dt::f32, tag::Abcde16a), "grouped to blocked");
}

TEST(OneDnnWeightRepack, AWindowOfALargerTensorIsRead) {
  // The live taps of a 3x3 kernel (tap_window.hpp): the middle row, as a strided sub-view.
  const memory::desc whole({32, 48, 3, 3}, dt::f32, tag::abcd);
  const memory::desc window = whole.submemory_desc({32, 48, 1, 3}, {0, 0, 1, 0});
  expect_same_as_onednn(window, memory::desc({32, 48, 1, 3}, dt::bf16, tag::ABcd8b16a2b), "window",
                        whole);
}

TEST(OneDnnWeightRepack, DeclinesWhatItDoesNotCover) {
  const memory::dims dims{32, 32, 3, 3};
  // bf16 source; blocked -> blocked; blocked -> a plain window; a 1-D bias.
  EXPECT_FALSE(onednn::WeightRepack::plan(memory::desc(dims, dt::bf16, tag::abcd),
                                          memory::desc(dims, dt::bf16, tag::ABcd8b16a2b)));
  EXPECT_FALSE(onednn::WeightRepack::plan(memory::desc(dims, dt::f32, tag::ABcd16b16a),
                                          memory::desc(dims, dt::f32, tag::BAcd16a16b)));
  const memory::desc whole({32, 32, 3, 3}, dt::f32, tag::abcd);
  EXPECT_FALSE(onednn::WeightRepack::plan(memory::desc({32, 32, 1, 3}, dt::f32, tag::ABcd16b16a),
                                          whole.submemory_desc({32, 32, 1, 3}, {0, 0, 1, 0})));
  EXPECT_FALSE(onednn::WeightRepack::plan(memory::desc({32}, dt::f32, tag::a),
                                          memory::desc({32}, dt::f32, tag::a)));
  // A tag with a block on the third dim (depthwise 3-D convolutions block groups of 5-D
  // weights on dim 0, fine; this one blocks dim 2).
  EXPECT_FALSE(onednn::WeightRepack::plan(memory::desc(dims, dt::f32, tag::abcd),
                                          memory::desc(dims, dt::f32, tag::aBCd16b16c)));
}

}  // namespace
}  // namespace crest
