#include "half_vector_ops.hpp"

#include <cmath>
#include <string>
#include <type_traits>

#include "dropout_hash.hpp"
#include "float16_codes.hpp"
#include "widest_vectors.hpp"

namespace crest {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr size_t kParallelMin = 1 << 14;

// bf16 sums element by element, at the CPU's vector width: the residual additions of a bf16
// network and the sums of its gradients, 1.3 % of DeepCAM's bf16 step when compiled for the
// baseline.
#define CREST_WIDEST_VECTORS_LOOPS "half_vector_ops.inc"
#include "widest_vectors_expand.hpp"

void add_bf16_loop(const uint16_t* x, const uint16_t* y, uint16_t* d, size_t count) {
  CREST_WIDEST_VECTORS_CALL(add_bf16_loop, x, y, d, count);
}

// One element type's conversions, so the loops below are written once for both.
struct Bf16Codes {
  static float load(uint16_t h) { return bf16_to_float(h); }
  static uint16_t store(float f) { return float_to_bf16(f); }
};
struct Fp16Codes {
  static float load(uint16_t h) { return fp16_to_float(h); }
  static uint16_t store(float f) { return float_to_fp16(f); }
};

// Losses and optimizers run on float32 values under mixed precision; reaching one of these with
// 16-bit values is a compile-step bug, not a user error.
[[noreturn]] void refuse(const char* op, DType t) {
  throw_runtime(std::string(op) + " does not run on " + dtype_name(t) +
                " values: losses and optimizers stay in float32 under mixed precision");
}

template <typename Codes>
class HalfOps final : public VectorOps {
 public:
  explicit HalfOps(DType dtype) : dtype_(dtype) {}
  DType dtype() const override { return dtype_; }

  void fill(void* x, size_t count, double value) override {
    auto* p = static_cast<uint16_t*>(x);
    const uint16_t v = Codes::store(static_cast<float>(value));
#pragma omp parallel for simd schedule(static) if (count >= kParallelMin)
    for (size_t i = 0; i < count; ++i) p[i] = v;
  }

  void copy(const void* src, void* dst, size_t count) override {
    const auto* s = static_cast<const uint16_t*>(src);
    auto* d = static_cast<uint16_t*>(dst);
    if (s == d) return;
#pragma omp parallel for simd schedule(static) if (count >= kParallelMin)
    for (size_t i = 0; i < count; ++i) d[i] = s[i];
  }

  void add(const void* a, const void* b, void* dst, size_t count) override {
    const auto* x = static_cast<const uint16_t*>(a);
    const auto* y = static_cast<const uint16_t*>(b);
    auto* d = static_cast<uint16_t*>(dst);
    if constexpr (std::is_same_v<Codes, Bf16Codes>) return add_bf16_loop(x, y, d, count);
#pragma omp parallel for simd schedule(static) if (count >= kParallelMin)
    for (size_t i = 0; i < count; ++i) d[i] = Codes::store(Codes::load(x[i]) + Codes::load(y[i]));
  }

  void axpy(double alpha, const void* x, void* y, size_t count) override {
    const auto* s = static_cast<const uint16_t*>(x);
    auto* d = static_cast<uint16_t*>(y);
#pragma omp parallel for simd schedule(static) if (count >= kParallelMin)
    for (size_t i = 0; i < count; ++i)
      d[i] = Codes::store(static_cast<float>(alpha * static_cast<double>(Codes::load(s[i])) +
                                             static_cast<double>(Codes::load(d[i]))));
  }

  void scale(double alpha, const void* x, void* dst, size_t count) override {
    const auto* s = static_cast<const uint16_t*>(x);
    auto* d = static_cast<uint16_t*>(dst);
#pragma omp parallel for simd schedule(static) if (count >= kParallelMin)
    for (size_t i = 0; i < count; ++i)
      d[i] = Codes::store(static_cast<float>(alpha * static_cast<double>(Codes::load(s[i]))));
  }

  double sum_squares(const void* x, size_t count) override {
    const auto* s = static_cast<const uint16_t*>(x);
    double sum = 0;
    for (size_t i = 0; i < count; ++i) {
      const double v = Codes::load(s[i]);
      sum += v * v;
    }
    return sum;
  }

  // The float32 ops' mask and scaling (dropout_hash.hpp), rounded once at the end.
  void dropout_at(const void* x, void* dst, size_t count, float p, uint64_t seed,
                  uint64_t first) override {
    if (!(p >= 0.f && p <= 1.f))
      throw_input("dropout: rate must be in [0, 1], got " + std::to_string(p));
    const auto* s = static_cast<const uint16_t*>(x);
    auto* d = static_cast<uint16_t*>(dst);
    const double keep_scale = p < 1.f ? 1.0 / (1.0 - static_cast<double>(p)) : 0.0;
    const double rate = p;
#pragma omp parallel for simd schedule(static) if (count >= kParallelMin)
    for (size_t i = 0; i < count; ++i) {
      const bool keep = dropout_uniform(seed, first + i) >= rate;
      d[i] = Codes::store(
          keep ? static_cast<float>(static_cast<double>(Codes::load(s[i])) * keep_scale) : 0.f);
    }
  }

  double mse(const void*, const void*, void*, size_t, double) override { refuse("mse", dtype_); }
  double softmax_cross_entropy(const void*, const int32_t*, const float*, double, void*, int64_t,
                               int64_t, int64_t, double) override {
    refuse("softmax_cross_entropy", dtype_);
  }
  void sgd_keras(void*, const void*, void*, size_t, double, double, bool) override {
    refuse("sgd", dtype_);
  }
  void range_sum_squares(const void*, const void*, const ElementRange*, size_t, double*,
                         double*) override {
    refuse("range_sum_squares", dtype_);
  }
  void lars_update(void*, const void*, void*, size_t, double, double, double, double) override {
    refuse("lars", dtype_);
  }
  void adam(void*, const void*, void*, void*, size_t, double, double, double, double, double, bool,
            int64_t) override {
    refuse("adam", dtype_);
  }
  void lamb_direction(const void*, void*, void*, void*, size_t, double, double, double, double,
                      double, int64_t) override {
    refuse("lamb", dtype_);
  }
  double narrow(const void*, double, void*, size_t, DType) override { refuse("narrow", dtype_); }
  void widen(const void*, DType, void*, size_t) override { refuse("widen", dtype_); }

 private:
  DType dtype_;
};

}  // namespace

std::unique_ptr<VectorOps> make_half_vector_ops(DType dtype) {
  require_float16(dtype, "16-bit vector ops");
  if (dtype == DType::bf16) return std::make_unique<HalfOps<Bf16Codes>>(dtype);
  return std::make_unique<HalfOps<Fp16Codes>>(dtype);
}

}  // namespace crest
