#include "onednn/conv_timing.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "crest/core/bf16.hpp"
#include "crest/core/fp16.hpp"
#include "crest/core/tensor.hpp"
#include "onednn/format.hpp"

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

Buffer filled_bytes(size_t bytes) {
  return filled(memory::desc({static_cast<memory::dim>(bytes + 1)}, memory::data_type::u8,
                             memory::format_tag::a));
}

// The reorder from the producer's layout into the kernel's src (and the input gradient's way
// back), as the compile step inserts it where they differ.
double time_bridges(LayoutTimer& timer, const ContextPtr& ctx, const std::string& name,
                    const memory::desc& hint, const memory::desc& src, bool back) {
  Buffer hinted = filled(hint), at_src = filled(src);
  LayoutBridge in(ctx, hint, src, "layout tuning");
  Buffer in_scratch = filled_bytes(in.scratch_bytes());
  double s = timer.seconds(name, "src reorder",
                           [&] { in.run(hinted.data(), at_src.data(), in_scratch.data()); });
  if (back) {
    LayoutBridge out(ctx, src, hint, "layout tuning");
    Buffer out_scratch = filled_bytes(out.scratch_bytes());
    s += timer.seconds(name, "diff_src reorder",
                       [&] { out.run(at_src.data(), hinted.data(), out_scratch.data()); });
  }
  return s;
}

// The passes a program runs, on buffers of those layouts: ConvPasses or a ConvKernel.
struct PassLayouts {
  memory::desc src, dst, weights, bias;  // bias empty: none
  bool bias_grad = true, training = true, data_grad = true;
  size_t scratch_bytes = 0;
};

template <typename Passes>
double time_passes(LayoutTimer& timer, const std::string& name, Passes& passes,
                   const PassLayouts& l) {
  Buffer src = filled(l.src), dst = filled(l.dst), diff_src = filled(l.src);
  Buffer diff_dst = filled(l.dst);
  Buffer weights = filled(l.weights), diff_weights = filled(l.weights);
  const bool bias = !l.bias.is_zero();
  Buffer bias_buf = filled(bias ? l.bias : l.weights),
         diff_bias = filled(bias ? l.bias : l.weights);
  Buffer scratch = filled_bytes(l.scratch_bytes);
  double s = timer.seconds(name, "forward", [&] {
    passes.forward(src.data(), weights.data(), bias ? bias_buf.data() : nullptr, dst.data(),
                   scratch.data());
  });
  if (l.training) {
    s += timer.seconds(name, "backward weights", [&] {
      passes.backward_weights(src.data(), diff_dst.data(), diff_weights.data(),
                              bias && l.bias_grad ? diff_bias.data() : nullptr, scratch.data());
    });
    if (l.data_grad)
      s += timer.seconds(name, "backward data", [&] {
        passes.backward_data(diff_dst.data(), weights.data(), diff_src.data(), scratch.data());
      });
  }
  return s;
}

}  // namespace

double time_conv_candidate(LayoutTimer& timer, const ContextPtr& ctx, const std::string& name,
                           ConvPasses& passes, const ConvTimingProblem& p) {
  const PassLayouts l{passes.src_desc(), passes.dst_desc(), p.weights.whole,       p.bias, true,
                      p.training,        p.data_grad,       passes.scratch_bytes()};
  double s = time_passes(timer, name, passes, l);
  if (p.hint && *p.hint != passes.src_desc())
    s += time_bridges(timer, ctx, name, *p.hint, passes.src_desc(), p.training && p.data_grad);
  return s;
}

double time_conv_kernel(LayoutTimer& timer, const ContextPtr& ctx, const std::string& name,
                        ConvKernel& kernel, const ConvDesc& d,
                        const std::optional<MemFormat>& hint) {
  int64_t taps = 1;
  for (size_t a = 0; a < static_cast<size_t>(d.spatial_rank); ++a) taps *= d.kernel[a];
  const memory::desc weights({d.in_channels * d.out_channels / d.groups * taps},
                             memory::data_type::f32, memory::format_tag::a);
  const memory::desc bias =
      d.bias ? memory::desc({d.out_channels}, memory::data_type::f32, memory::format_tag::a)
             : memory::desc();
  const PassLayouts l{to_desc(kernel.src_format()),
                      to_desc(kernel.dst_format()),
                      weights,
                      bias,
                      d.bias_grad,
                      d.training,
                      d.data_grad,
                      kernel.scratch_bytes()};
  double s = time_passes(timer, name, kernel, l);
  if (hint && *hint != kernel.src_format())
    s += time_bridges(timer, ctx, name, to_desc(*hint), l.src, d.training && d.data_grad);
  return s;
}

}  // namespace crest::onednn
