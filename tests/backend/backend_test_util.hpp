// Shared helpers for backend-agreement tests: random data, buffers in any format (converted with
// the onednn backend's own reorder kernel, so the tests never call oneDNN directly), and
// tolerance checks against the reference backend.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "crest/backends/kernels.hpp"
#include "crest/core/bf16.hpp"
#include "crest/core/tensor.hpp"

namespace crest::testing {

inline std::vector<float> random_floats(size_t count, uint32_t seed, float lo = -1.f,
                                        float hi = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(count);
  for (float& x : v) x = dist(gen);
  return v;
}

// A buffer holding a tensor in format `f`, filled from (or read back into) plain data.
class FormattedBuffer {
 public:
  FormattedBuffer(Backend& onednn, const MemFormat& f)
      : backend_(&onednn), format_(f), buf_(std::max<size_t>(f.bytes, 4)) {
    // Garbage in every byte, so a kernel that fails to write its whole output is caught.
    std::memset(buf_.data(), 0x7f, buf_.bytes());
  }
  FormattedBuffer(Backend& onednn, const MemFormat& f, const std::vector<float>& plain)
      : FormattedBuffer(onednn, f) {
    set(plain);
  }

  void set(const std::vector<float>& plain) {
    EXPECT_EQ(plain.size(), static_cast<size_t>(format_.shape.numel()));
    const MemFormat p = plain_format(format_.shape, format_.dtype);
    backend_->reorder(p, format_)->execute(plain.data(), buf_.data());
  }
  std::vector<float> get() const {
    std::vector<float> out(static_cast<size_t>(format_.shape.numel()));
    const MemFormat p = plain_format(format_.shape, format_.dtype);
    backend_->reorder(format_, p)->execute(buf_.data(), out.data());
    return out;
  }
  void* data() const { return buf_.data(); }
  const MemFormat& format() const { return format_; }

 private:
  Backend* backend_;
  MemFormat format_;
  Buffer buf_;
};

inline double max_abs(const std::vector<float>& v) {
  double m = 0.0;
  for (float x : v) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

// |got - ref| <= tol * (1 + max |ref|) everywhere; reports the worst element.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& ref, double tol,
                         const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  const double bound = tol * (1.0 + max_abs(ref));
  double worst = 0.0;
  size_t at = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - static_cast<double>(ref[i]));
    if (!(d <= worst)) {  // also catches NaN
      worst = std::isnan(d) ? INFINITY : d;
      at = i;
    }
  }
  EXPECT_LE(worst, bound) << what << ": worst element " << at << " got " << got[at] << " want "
                          << ref[at] << " (" << ref.size() << " elements)";
}

// plain [n, c, h, w] floats -> the channels-last bytes of `dtype` (float32 or bf16), for kernels
// tested on their own.
inline std::vector<char> channels_last_bytes(const std::vector<float>& x, int64_t n, int64_t c,
                                             int64_t h, int64_t w, DType dtype) {
  std::vector<char> out(x.size() * dtype_size(dtype));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t p = 0; p < h * w; ++p) {
        const float v = x[static_cast<size_t>((b * c + k) * h * w + p)];
        const auto at = static_cast<size_t>((b * h * w + p) * c + k);
        if (dtype == DType::bf16) {
          const uint16_t code = float_to_bf16(v);
          std::memcpy(out.data() + at * 2, &code, 2);
        } else {
          std::memcpy(out.data() + at * 4, &v, 4);
        }
      }
  return out;
}

// A blocked format of `shape` as the onednn backend lays out conv outputs (e.g. nChw16c), taken
// from a 3x3 "same" convolution with that many channels (with 16 or more channels oneDNN's
// direct kernels choose a blocked layout).
inline MemFormat onednn_conv_format(Backend& onednn, const Shape& shape) {
  ConvDesc d;
  d.spatial_rank = shape.rank() - 2;
  d.n = shape[0];
  d.in_channels = shape[1];
  d.out_channels = shape[1];
  for (int i = 0; i < d.spatial_rank; ++i) {
    d.in_size[static_cast<size_t>(i)] = shape[i + 2];
    d.out_size[static_cast<size_t>(i)] = shape[i + 2];
    d.kernel[static_cast<size_t>(i)] = 3;
    d.pad_lo[static_cast<size_t>(i)] = 1;
    d.pad_hi[static_cast<size_t>(i)] = 1;
  }
  return onednn.conv(d, plain_format(shape, DType::f32))->dst_format();
}

}  // namespace crest::testing
