// ConvDataGradient (conv_data_gradient.hpp): the input gradient of a split convolution from the
// output gradient's halo.
#include "crest/spatial/conv_data_gradient.hpp"

namespace crest {
namespace {

// The plans of the reversed windows (the output gradient's rows reaching the owned input rows),
// or why there are none. Rank-independent: every part of every axis is checked.
std::string reversed_plans(const ConvDesc& global, const SpatialPlacement& where,
                           std::vector<AxisPlan>& plans) {
  const std::vector<WindowAxis> axes = window_axes(global);
  const std::vector<int> coords = where.grid.coords(where.group->rank());
  for (size_t i = 0; i < axes.size(); ++i) {
    const WindowAxis w = reversed(axes[i]);
    const int parts = where.grid.parts[i];
    if (const std::string problem = split_problem(w, parts); !problem.empty())
      return "the output gradient along " +
             spatial_axis_name(static_cast<int>(axes.size()), static_cast<int>(i)) + ": " + problem;
    plans.push_back(plan_axis(w, parts, coords[i], where.layer, "the output gradient"));
  }
  return "";
}

// A convolution from the owned input rows to the output-gradient window: the reversed plan's
// padding makes each window row read what it reads in the whole convolution. An axis of one
// part keeps the whole convolution's extents and padding (its reversed padding would be
// negative where a stride leaves the last input rows unread).
ConvDesc gradient_desc(const ConvDesc& global, const std::vector<AxisPlan>& plans) {
  ConvDesc d = global;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (plans[i].parts == 1) continue;
    d.in_size[i] = plans[i].owned_out.size();
    d.out_size[i] = plans[i].window.size();
    d.pad_lo[i] = plans[i].pad_lo;
    d.pad_hi[i] = plans[i].pad_hi;
  }
  d.bias_grad = false;  // only backward_data runs
  return d;
}

// The group's one decision: every rank must exchange the same way.
std::string agree(Communicator& group, const std::string& mine) {
  const bool anyone_refuses = group.allreduce_max(mine.empty() ? 0.0 : 1.0) > 0;
  if (!mine.empty()) return mine;
  return anyone_refuses ? "another rank of the group cannot" : "";
}

}  // namespace

std::unique_ptr<ConvDataGradient> ConvDataGradient::make(Backend& backend, const ConvDesc& global,
                                                         const ConvKernel& forward,
                                                         const WindowPart& part,
                                                         std::string& why_not) {
  if (!global.training || !global.data_grad) {
    why_not = "no input gradient runs";
    return nullptr;
  }
  const SpatialPlacement& where = part.where;
  std::vector<AxisPlan> plans;
  std::string mine = reversed_plans(global, where, plans);
  std::unique_ptr<ConvKernel> kernel;
  if (mine.empty() && !part.halo->moves_rows()) mine = "no rows move";
  if (mine.empty()) {
    const ConvDesc d = gradient_desc(global, plans);
    std::vector<int64_t> owned{d.n, d.in_channels};
    for (size_t i = 0; i < plans.size(); ++i) owned.push_back(d.in_size[i]);
    kernel = backend.conv(d, plain_format(Shape(owned), d.dtype, part.src_layout));
    if (runs_reference_code(*kernel) && !runs_reference_code(forward))
      mine = "its kernel would run oneDNN's reference code (" + kernel->implementation() + ")";
  }
  why_not = agree(*where.group, mine);
  if (!why_not.empty()) return nullptr;

  std::unique_ptr<ConvDataGradient> g(new ConvDataGradient());
  g->kernel_ = std::move(kernel);
  // Its own message tags: it is in flight while the weight gradient gathers the input's window.
  g->halo_ = make_halo(where, plans, global.n, global.out_channels, global.dtype, part.dst_layout,
                       "layer '" + where.layer + "' (output gradient)", /*channel=*/1);
  g->diff_dst_ = std::make_unique<FormatBridge>(backend, g->kernel_->dst_format(), part.dst_layout);
  g->diff_src_ = std::make_unique<FormatBridge>(backend, g->kernel_->src_format(), part.src_layout);
  g->window_bytes_ = align_up(g->halo_->window_bytes(), 256);
  g->work_ =
      WindowScratch(0, g->diff_src_->bytes(), g->diff_dst_->bytes(), g->kernel_->scratch_bytes());
  return g;
}

void ConvDataGradient::run(const void* diff_dst, const void* weights, void* diff_src,
                           Scratch scratch) {
  auto pending = start(diff_dst, scratch.window);
  finish(*pending, weights, diff_src, scratch);
}

// A halo that moves no rows copies the block into the window and posts nothing.
std::unique_ptr<PendingCollective> ConvDataGradient::start(const void* diff_dst, void* window) {
  return halo_->start_gather(diff_dst, window);
}

void ConvDataGradient::finish(PendingCollective& pending, const void* weights, void* diff_src,
                              Scratch scratch) {
  const auto m = work_.at(scratch.work);
  halo_->finish_gather(pending, scratch.window);
  kernel_->backward_data(diff_dst_->to_kernel(scratch.window, m.dst), weights,
                         diff_src_->kernel_buffer(diff_src, m.src), m.kernel);
  diff_src_->to_plain(m.src, diff_src);
}

}  // namespace crest
