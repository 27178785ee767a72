// The reorder the compiler inserts where a layer wants its input in another format than its
// producer delivers (create_kernels.cpp): not a registered kind, never in a graph.
#pragma once
#include <memory>

#include "crest/graph/layer.hpp"

namespace crest::compile {

class ReorderLayer : public Layer {
 public:
  ReorderLayer(MemFormat from, MemFormat to) : from_(std::move(from)), to_(std::move(to)) {}
  std::string kind() const override { return "reorder"; }
  // Inserted after precisions are assigned; it converts between them.
  bool computes_in_half() const override { return false; }
  std::vector<Shape> infer_shapes(const std::vector<Shape>& in) const override { return in; }
  void create(CreateContext& ctx) override;
  void forward(RunContext& ctx) override;
  void backward(RunContext& ctx) override;
  std::string describe() const override;

 private:
  MemFormat from_, to_;
  std::unique_ptr<ReorderKernel> fwd_, bwd_;
};

}  // namespace crest::compile
