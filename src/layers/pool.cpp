#include "crest/layers/pool.hpp"

#include <sstream>

#include "crest/core/error.hpp"
#include "crest/graph/spatial_split.hpp"

namespace crest {
namespace {

using O = PoolOptions;

std::vector<AttrField<O>> window_fields() {
  return {attr_field("kernel", &O::kernel), attr_field("stride", &O::stride),
          attr_field("padding", &O::padding)};
}

// PyTorch's AvgPool count_include_pad (default true; Keras pools without padding either way).
std::vector<AttrField<O>> avg_fields() {
  auto f = window_fields();
  f.push_back({"count_include_pad", AttrType::boolean,
               [](O& o, const AttrValue& v) {
                 o.kind = std::get<bool>(v) ? PoolKind::avg_include_pad : PoolKind::avg_exclude_pad;
               },
               [](const O& o) -> AttrValue { return o.kind != PoolKind::avg_exclude_pad; }});
  return f;
}

}  // namespace

CREST_REGISTER_LAYER(max_pool, layer_kind<PoolLayer, O>("max_pool", window_fields(), [](O& o) {
                       o.kind = PoolKind::max;
                       o.global = false;
                     }));
CREST_REGISTER_LAYER(avg_pool, layer_kind<PoolLayer, O>("avg_pool", avg_fields(), [](O& o) {
                       if (o.kind == PoolKind::max) o.kind = PoolKind::avg_include_pad;
                       o.global = false;
                     }));
CREST_REGISTER_LAYER(global_avg_pool, layer_kind<PoolLayer, O>("global_avg_pool", {}, [](O& o) {
                       o.kind = PoolKind::avg_include_pad;
                       o.global = true;
                     }));

LayerSpec layers::pool(const PoolOptions& o) {
  if (o.global) return layer_spec("global_avg_pool", std::vector<AttrField<O>>{}, o);
  if (o.kind == PoolKind::max) return layer_spec("max_pool", window_fields(), o);
  return layer_spec("avg_pool", avg_fields(), o);
}

std::string PoolLayer::kind() const {
  if (opts_.global) return "global_avg_pool";
  return opts_.kind == PoolKind::max ? "max_pool" : "avg_pool";
}

std::vector<Shape> PoolLayer::infer_shapes(const std::vector<Shape>& in) const {
  if (in.size() != 1) throw_input("pooling takes one input");
  const int r = opts_.global ? in[0].rank() - 2 : static_cast<int>(opts_.kernel.size());
  if (r < 1 || r > 3 || in[0].rank() != r + 2)
    throw_input("pooling with a " + std::to_string(r) + "-D window needs a rank-" +
                std::to_string(r + 2) + " input, got " + in[0].str());
  std::vector<int64_t> out{in[0][0], in[0][1]};
  for (int i = 0; i < r; ++i) {
    if (opts_.global) {
      out.push_back(1);
      continue;
    }
    const auto u = static_cast<size_t>(i);
    const int64_t k = opts_.kernel[u];
    const int64_t s = opts_.stride.empty() ? k : opts_.stride[opts_.stride.size() == 1 ? 0 : u];
    const int64_t p = opts_.padding.empty() ? 0 : opts_.padding[opts_.padding.size() == 1 ? 0 : u];
    if (k < 1 || s < 1 || p < 0 || 2 * p >= k + (k > 1 ? 0 : 1))
      throw_input("pooling window " + std::to_string(k) + ", stride " + std::to_string(s) +
                  ", padding " + std::to_string(p) + " is invalid (padding must be < window/2)");
    const int64_t o = (in[0][2 + i] + 2 * p - k) / s + 1;
    if (o < 1) throw_input("pooling output would be empty for input " + in[0].str());
    out.push_back(o);
  }
  return {Shape(out)};
}

PoolDesc PoolLayer::make_desc(const Shape& in, const Shape& out, DType dtype) const {
  PoolDesc d;
  const int r = in.rank() - 2;
  d.spatial_rank = r;
  d.kind = opts_.global ? PoolKind::avg_include_pad : opts_.kind;
  d.n = in[0];
  d.channels = in[1];
  d.dtype = dtype;
  for (int i = 0; i < r; ++i) {
    const auto u = static_cast<size_t>(i);
    d.in_size[u] = in[2 + i];
    d.out_size[u] = out[2 + i];
    if (opts_.global) {
      d.kernel[u] = in[2 + i];
      d.stride[u] = 1;
      continue;
    }
    d.kernel[u] = opts_.kernel[u];
    d.stride[u] =
        opts_.stride.empty() ? d.kernel[u] : opts_.stride[opts_.stride.size() == 1 ? 0 : u];
    const int64_t p = opts_.padding.empty() ? 0 : opts_.padding[opts_.padding.size() == 1 ? 0 : u];
    // Symmetric padding; out = floor((in + 2p - k) / s) + 1 as every framework computes it.
    d.pad_lo[u] = p;
    d.pad_hi[u] = p;
  }
  return d;
}

void PoolLayer::create(CreateContext& ctx) {
  if (ctx.spatial)  // split spatially: this rank's block, from the whole layer's descriptor
    kernel_ = ctx.spatial->pool(
        ctx.backend, make_desc(ctx.global_in_shapes[0], ctx.global_out_shapes[0], ctx.dtype),
        ctx.name);
  else
    kernel_ = ctx.backend.pool(make_desc(ctx.in_shapes[0], ctx.out_shapes[0], ctx.dtype),
                               ctx.in_formats[0]);
  ctx.in_formats[0] = kernel_->src_format();
  ctx.out_formats = {kernel_->dst_format()};
  ctx.workspace_bytes = kernel_->workspace_bytes();
  ctx.scratch_bytes = kernel_->scratch_bytes();
}

void PoolLayer::forward(RunContext& ctx) {
  kernel_->forward(ctx.in[0], ctx.out[0], ctx.workspace, ctx.scratch);
}

void PoolLayer::backward(RunContext& ctx) {
  if (ctx.diff_in[0])
    kernel_->backward(ctx.diff_out[0], ctx.workspace, ctx.diff_in[0], ctx.scratch);
}

Flops PoolLayer::flops(const std::vector<Shape>& in, const std::vector<Shape>&) const {
  // One comparison or add per input element read: negligible next to convolutions, but counted.
  const double f = static_cast<double>(in[0].numel());
  return {f, f, 0.0};
}

std::string PoolLayer::describe() const {
  if (opts_.global) return "global";
  std::ostringstream os;
  for (size_t i = 0; i < opts_.kernel.size(); ++i) os << (i ? "x" : "") << opts_.kernel[i];
  return os.str();
}

}  // namespace crest
