#include "crest/engine/random_batch.hpp"

#include <algorithm>
#include <tuple>

#include "crest/core/bf16.hpp"
#include "crest/core/fp16.hpp"
#include "crest/core/host_staging.hpp"

namespace crest {

// Random inputs like the peer scripts' (CosmoFlow's ln(1 + counts) and DeepCAM's normalised
// fields are O(1)), written on the host and copied into the model's memory. Integer targets are
// class labels with the classes' rough frequencies (mostly background). A 16-bit input
// (CompileOptions::half_inputs) gets the same floats rounded, as BatchFeed writes a loader's.
void fill_random_batch(Executor& ex, const BuiltModel& m, Backend& backend,
                       const std::vector<std::string>& only) {
  uint64_t s = 42;
  auto next = [&s] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<double>(s >> 40) * 0x1.0p-24);
  };
  for (const auto& [input, scale, offset] :
       {std::tuple{m.sample_input, 2.f, 0.f}, std::tuple{m.target_input, 2.f, -1.f}}) {
    if (!only.empty() && std::find(only.begin(), only.end(), input) == only.end()) continue;
    const TensorView in = ex.input(input);
    HostStaging staged(backend.memory(), in.data(), in.bytes(), /*fetch=*/false);
    for (int64_t i = 0; i < in.numel(); ++i) {
      if (in.dtype() == DType::i32) {
        const float u = next();
        staged.as<int32_t>()[i] = u < 0.9f ? 0 : u < 0.92f ? 1 : 2;
      } else if (in.dtype() == DType::bf16) {
        staged.as<uint16_t>()[i] = float_to_bf16(scale * next() + offset);
      } else if (in.dtype() == DType::f16) {
        staged.as<uint16_t>()[i] = float_to_fp16(scale * next() + offset);
      } else if (in.dtype() == DType::f64) {
        staged.as<double>()[i] = scale * next() + offset;
      } else {
        staged.as<float>()[i] = scale * next() + offset;
      }
    }
    staged.commit();
  }
}

}  // namespace crest
