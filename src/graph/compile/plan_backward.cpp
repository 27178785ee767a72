// What each op's backward reads (the planner keeps exactly those alive), whether it runs at all
// (some output has a gradient and it has an input gradient or trainable parameter to produce),
// and its FLOPs for benchmarks and reports.
#include "compile/program.hpp"

namespace crest::compile {
namespace {

std::vector<Shape> shapes_of(const Program& p, const std::vector<int>& values) {
  std::vector<Shape> s;
  s.reserve(values.size());
  for (int v : values) s.push_back(p.val(v).shape);
  return s;
}

}  // namespace

void plan_backward(Program& p) {
  for (auto& op : p.ops) {
    op->needs = op->layer->backward_needs(op->in.size(), op->out.size());
    bool any_in_grad = false;
    for (bool b : op->need_input_grad) any_in_grad = any_in_grad || b;
    bool has_trainable = false;
    for (int s : op->param_slots)
      has_trainable = has_trainable || p.params.slots()[static_cast<size_t>(s)].spec.trainable;
    // Loss layers start backward from their inputs; everyone else from their outputs' gradient.
    bool outputs_have_grad = op->layer->is_loss();
    for (int v : op->out) outputs_have_grad = outputs_have_grad || p.val(v).needs_grad;
    op->run_backward = p.opts.training && outputs_have_grad && (any_in_grad || has_trainable);
    op->flops = op->layer->flops(shapes_of(p, op->in), shapes_of(p, op->out));
  }
  p.finished_in_backward.assign(p.params.slots().size(), false);
  for (const auto& op : p.ops)
    if (op->run_backward)
      for (int s : op->param_slots) p.finished_in_backward[static_cast<size_t>(s)] = true;
}

}  // namespace crest::compile
