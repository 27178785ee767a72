#include "onednn/conv_timing.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "crest/core/bf16.hpp"
#include "crest/core/fp16.hpp"
#include "crest/core/tensor.hpp"

namespace crest::onednn {
namespace {

using dnnl::memory;

// A buffer for a tensor of layout `d`, filled with small values of its data type (padding too:
// it is never read back).
Buffer filled(const memory::desc& d) {
  const size_t bytes = std::max<size_t>(d.get_size(), 64);
  Buffer b(bytes);
  const memory::data_type t = d.get_data_type();
  auto value = [](size_t i) { return static_cast<float>(static_cast<int>(i % 17) - 8) / 64.f; };
  if (t == memory::data_type::f32) {
    auto* p = static_cast<float*>(b.data());
    for (size_t i = 0; i < bytes / sizeof(float); ++i) p[i] = value(i);
  } else if (t == memory::data_type::bf16 || t == memory::data_type::f16) {
    auto* p = static_cast<uint16_t*>(b.data());
    for (size_t i = 0; i < bytes / sizeof(uint16_t); ++i)
      p[i] = t == memory::data_type::bf16 ? float_to_bf16(value(i)) : float_to_fp16(value(i));
  } else {
    std::memset(b.data(), 0x11, bytes);
  }
  return b;
}

}  // namespace

double time_conv_candidate(LayoutTimer& timer, const ContextPtr& ctx, const std::string& name,
                           ConvPasses& passes, const ConvTimingProblem& p) {
  Buffer src = filled(passes.src_desc()), dst = filled(passes.dst_desc());
  Buffer diff_src = filled(passes.src_desc()), diff_dst = filled(passes.dst_desc());
  Buffer weights = filled(p.weights.whole), diff_weights = filled(p.weights.whole);
  const bool bias = !p.bias.is_zero();
  Buffer bias_buf = filled(bias ? p.bias : p.weights.whole);
  Buffer diff_bias = filled(bias ? p.bias : p.weights.whole);
  Buffer scratch = filled(memory::desc({static_cast<memory::dim>(passes.scratch_bytes() + 1)},
                                       memory::data_type::u8, memory::format_tag::a));

  double s = timer.seconds(name, "forward", [&] {
    passes.forward(src.data(), weights.data(), bias ? bias_buf.data() : nullptr, dst.data(),
                   scratch.data());
  });
  if (p.training) {
    s += timer.seconds(name, "backward weights", [&] {
      passes.backward_weights(src.data(), diff_dst.data(), diff_weights.data(),
                              bias ? diff_bias.data() : nullptr, scratch.data());
    });
    if (p.data_grad)
      s += timer.seconds(name, "backward data", [&] {
        passes.backward_data(diff_dst.data(), weights.data(), diff_src.data(), scratch.data());
      });
  }
  // The compile step inserts a reorder where the producer's layout differs from src (and its
  // backward takes the input gradient back).
  if (p.hint && *p.hint != passes.src_desc()) {
    Buffer hinted = filled(*p.hint);
    LayoutBridge in(ctx, *p.hint, passes.src_desc(), "layout tuning");
    Buffer bridge_scratch = filled(memory::desc({static_cast<memory::dim>(in.scratch_bytes() + 1)},
                                                memory::data_type::u8, memory::format_tag::a));
    s += timer.seconds(name, "src reorder",
                       [&] { in.run(hinted.data(), src.data(), bridge_scratch.data()); });
    if (p.training && p.data_grad) {
      LayoutBridge back(ctx, passes.src_desc(), *p.hint, "layout tuning");
      Buffer back_scratch =
          filled(memory::desc({static_cast<memory::dim>(back.scratch_bytes() + 1)},
                              memory::data_type::u8, memory::format_tag::a));
      s += timer.seconds(name, "diff_src reorder",
                         [&] { back.run(diff_src.data(), hinted.data(), back_scratch.data()); });
    }
  }
  return s;
}

}  // namespace crest::onednn
