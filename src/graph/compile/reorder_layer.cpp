#include "compile/reorder_layer.hpp"

namespace crest::compile {

void ReorderLayer::create(CreateContext& ctx) {
  ctx.in_formats[0] = from_;
  ctx.out_formats = {to_};
  fwd_ = ctx.backend.reorder(from_, to_);
  if (ctx.need_input_grad[0]) bwd_ = ctx.backend.reorder(to_, from_);
}

void ReorderLayer::forward(RunContext& ctx) { fwd_->execute(ctx.in[0], ctx.out[0]); }

void ReorderLayer::backward(RunContext& ctx) {
  if (bwd_ && ctx.diff_in[0]) bwd_->execute(ctx.diff_out[0], ctx.diff_in[0]);
}

std::string ReorderLayer::describe() const { return from_.str() + " -> " + to_.str(); }

}  // namespace crest::compile
