// The compile passes one by one (src/graph/compile/), on the branchy test model: each pass is a
// function of the Program the previous ones left, so its decisions can be checked directly.
#include <gtest/gtest.h>

#include "crest/core/error.hpp"
#include "crest/models/cosmoflow.hpp"
#include "graph/compile/program.hpp"
#include "support/small_models.hpp"
#include "support/test_util.hpp"

namespace crest::compile {
namespace {

CompileOptions batch_of_two(bool fuse = true) {
  CompileOptions o;
  o.batch = 2;
  o.fuse = fuse;
  return o;
}

struct Compiled {
  explicit Compiled(const Graph& g, const std::string& backend_name, bool fuse = true)
      : Compiled(g, backend_name, batch_of_two(fuse)) {}
  Compiled(const Graph& g, const std::string& backend_name, const CompileOptions& o)
      : backend(make_backend(backend_name)), p(*backend, o) {
    instantiate_layers(p, g);
  }
  std::unique_ptr<Backend> backend;
  Program p;
};

const Node& node(const Program& p, const std::string& name) {
  for (const Node& n : p.nodes)
    if (n.name == name) return n;
  throw std::runtime_error("no node " + name);
}

size_t position(const Program& p, const std::string& name) {
  for (size_t i = 0; i < p.nodes.size(); ++i)
    if (p.nodes[i].name == name) return i;
  return p.nodes.size();
}

TEST(CompilePasses, InstantiateMakesOneLayerPerNodeAndLeavesTheGraph) {
  const test::SmallModel m = test::branchy_model();
  Compiled c(m.graph, "reference");
  ASSERT_EQ(c.p.nodes.size(), m.graph.nodes().size());
  for (size_t i = 0; i < c.p.nodes.size(); ++i) {
    EXPECT_EQ(c.p.nodes[i].name, m.graph.nodes()[i].name);
    EXPECT_NE(c.p.nodes[i].layer, nullptr);
  }
}

TEST(CompilePasses, MonotoneActivationMovesAfterMaxPoolOnlyWhenFusing) {
  const test::SmallModel m = test::branchy_model();
  Compiled on(m.graph, "reference"), off(m.graph, "reference", /*fuse=*/false);
  swap_activation_pool(on.p, m.graph);
  swap_activation_pool(off.p, m.graph);
  EXPECT_LT(position(on.p, "pool1"), position(on.p, "act1"));
  EXPECT_LT(position(off.p, "act1"), position(off.p, "pool1"));
  // The pool now reads the conv output, the activation the pool's.
  EXPECT_EQ(node(on.p, "pool1").inputs, node(on.p, "conv1").outputs);
  EXPECT_EQ(node(on.p, "act1").inputs, node(on.p, "pool1").outputs);
}

TEST(CompilePasses, GradientsOnlyWhereTheyReachTheLossFromAParameter) {
  const test::SmallModel m = test::branchy_model();
  Compiled c(m.graph, "reference");
  infer_shapes(c.p, m.graph);
  store_params(c.p);
  EXPECT_FALSE(c.p.val(m.x).needs_grad);  // the data needs no gradient
  EXPECT_FALSE(c.p.val(m.y).needs_grad);
  EXPECT_TRUE(c.p.val(node(c.p, "conv1").outputs[0]).needs_grad);
  EXPECT_EQ(c.p.val(node(c.p, "conv1").outputs[0]).shape, (Shape{2, 4, 6, 8}));
  EXPECT_EQ(node(c.p, "conv1").param_slots.size(), 2u);  // weight and bias
}

TEST(CompilePasses, ConvAbsorbsTheActivationThatIsItsOnlyReader) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");  // the backend that fuses activations into convs
  const test::SmallModel m = test::branchy_model();
  Compiled c(m.graph, "onednn");
  swap_activation_pool(c.p, m.graph);
  infer_shapes(c.p, m.graph);
  store_params(c.p);
  choose_fusions(c.p, m.graph);
  // conv2 -> act2 (tanh): fused. conv1 is read by pool1 after the swap: nothing to fuse.
  EXPECT_EQ(node(c.p, "conv2").post_op.kind, EltwiseKind::tanh);
  EXPECT_TRUE(node(c.p, "act2").fused_into_producer);
  EXPECT_EQ(node(c.p, "conv1").post_op.kind, EltwiseKind::none);
  EXPECT_FALSE(node(c.p, "act1").fused_into_producer);
  // A dense layer takes no post-op: fc1's sigmoid runs on its own.
  EXPECT_FALSE(node(c.p, "fc1_act").fused_into_producer);
}

TEST(CompilePasses, ConvBiasGradientComesFromTheMaxPoolAfterIt) {
  const test::SmallModel m = test::branchy_model();
  Compiled on(m.graph, "reference"), off(m.graph, "reference", /*fuse=*/false);
  for (Compiled* c : {&on, &off}) {
    swap_activation_pool(c->p, m.graph);
    infer_shapes(c->p, m.graph);
    store_params(c->p);
    choose_fusions(c->p, m.graph);
    route_bias_grad(c->p, m.graph);
  }
  // After the swap conv1 is read by pool1 alone: pool1's op sums conv1's bias gradient.
  const int bias = on.p.params.find("conv1.bias");
  ASSERT_GE(bias, 0);
  EXPECT_TRUE(node(on.p, "conv1").bias_grad_elsewhere);
  EXPECT_EQ(node(on.p, "pool1").channel_sum_slot, bias);
  // conv2 feeds a tanh, not a max pooling: its bias gradient stays in its kernel.
  EXPECT_FALSE(node(on.p, "conv2").bias_grad_elsewhere);
  // Without fusion the activation sits between conv1 and pool1: nothing moves.
  EXPECT_FALSE(node(off.p, "conv1").bias_grad_elsewhere);
  EXPECT_EQ(node(off.p, "pool1").channel_sum_slot, -1);
}

// Mixed precision: with half_inputs, the data input (read by conv1 alone, a bf16 node) is stored
// in bf16 in its declared layout; the target, read by the float32 loss, stays float32. Without
// half_inputs, without mixed precision, or with the input's gradient asked, nothing changes.
TEST(CompilePasses, AnInputOnlyHalfLayersReadIsStoredInTheHalfTypeWhenAsked) {
  const test::SmallModel m = test::branchy_model();
  struct Case {
    bool half, half_inputs, input_grads;
    DType x_dtype;
  };
  for (const Case k : {Case{true, true, false, DType::bf16}, Case{true, false, false, DType::f32},
                       Case{false, true, false, DType::f32}, Case{true, true, true, DType::f32}}) {
    CompileOptions o = batch_of_two();
    if (k.half) o.half = DType::bf16;
    o.half_inputs = k.half_inputs;
    o.input_grads = k.input_grads;
    Compiled c(m.graph, "reference", o);
    swap_activation_pool(c.p, m.graph);
    infer_shapes(c.p, m.graph);
    store_params(c.p);
    assign_precision(c.p);
    narrow_inputs(c.p, m.graph);
    const std::string what =
        std::to_string(k.half) + std::to_string(k.half_inputs) + std::to_string(k.input_grads);
    EXPECT_EQ(c.p.val(m.x).fmt.dtype, k.x_dtype) << what;
    EXPECT_EQ(c.p.val(m.x).fmt.layout, Layout::channels_last) << what;
    EXPECT_EQ(c.p.val(m.y).fmt.dtype, DType::f32) << what;
  }
}

TEST(CompilePasses, KernelsReorderAndThePlanIsValid) {
  CREST_SKIP_WITHOUT_BACKEND("onednn");  // the backend with blocked layouts
  CosmoFlowOptions o;
  o.input_shape = {32, 32, 32, 4};
  o.conv_size = 16;  // 16 channels and more: oneDNN's blocked nCdhw16c between the convs
  const CosmoFlowModel m = build_cosmoflow(o);
  Compiled c(m.graph, "onednn");
  swap_activation_pool(c.p, m.graph);
  infer_shapes(c.p, m.graph);
  store_params(c.p);
  choose_fusions(c.p, m.graph);
  create_kernels(c.p, m.graph);
  int reorders = 0;
  for (const auto& op : c.p.ops) reorders += op->layer->kind() == "reorder";
  EXPECT_GT(reorders, 0) << "channels-last conv1 and blocked conv2 meet: a reorder between";
  EXPECT_GE(c.p.loss_op, 0);
  plan_backward(c.p);
  plan_storage(c.p);
  std::string why;
  EXPECT_TRUE(plan_is_valid(c.p.plan, &why)) << why;
  EXPECT_LT(c.p.plan.arena_bytes, c.p.plan.naive_bytes);
  for (const auto& op : c.p.ops)
    if (op->fused_into_producer) {
      EXPECT_TRUE(op->inplace) << op->name;
    }
}

}  // namespace
}  // namespace crest::compile
