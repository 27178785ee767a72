// The compile step and the run loop. Compile order:
//   1. shapes, which values need gradients (downstream of a parameter and upstream of the loss)
//   2. activation fusion into producers (only where the activation can run in place)
//   3. kernel creation in topological order, inserting reorders where a layer wants another format
//   4. storage sharing (in-place activations, flatten views), lifetimes over the schedule
//      forward 0..n-1, backward n..2n-1, then one arena planned by liveness
//   5. run contexts with every pointer fixed, so a step builds nothing
#include "crest/graph/executor.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iomanip>
#include <map>
#include <numeric>
#include <sstream>

#include "crest/core/error.hpp"
#include "crest/core/units.hpp"
#include "crest/layers/shape_ops.hpp"

namespace crest {

struct Executor::Value {
  std::string name;
  Shape shape;
  MemFormat fmt;
  int producer = -1;           // op index; -1 for graph inputs
  std::vector<int> consumers;  // op indices (an op appears once per input slot)
  bool needs_grad = false;
  bool pinned = false;  // graph inputs, marked outputs, the loss: alive the whole step
  int graph_input = -1;
  int storage = -1;       // plan block of the forward value
  int grad_storage = -1;  // plan block of its gradient
};

struct Executor::Op {
  std::string name;
  Layer* layer = nullptr;
  std::vector<int> in, out;
  std::vector<int> param_slots;
  BackwardNeeds needs;
  std::vector<bool> need_input_grad;
  size_t workspace_bytes = 0, scratch_bytes = 0;
  int workspace_block = -1;
  bool run_backward = false;
  bool inplace = false;       // output 0 shares input 0's storage
  bool grad_inplace = false;  // diff input 0 shares diff output 0
  bool fused_into_producer = false;
  Flops flops;
  RunContext ctx;
  // After this op's backward: grad(value) += temp block, for values read by several layers.
  struct Accum {
    int value;
    int temp_block;
  };
  std::vector<Accum> accum;
  std::vector<int> temp_grad_block;  // per input slot: -1 = writes the value's gradient directly
};

namespace {

class UnionFind {
 public:
  explicit UnionFind(size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  int find(int x) {
    while (parent_[static_cast<size_t>(x)] != x)
      x = parent_[static_cast<size_t>(x)] =
          parent_[static_cast<size_t>(parent_[static_cast<size_t>(x)])];
    return x;
  }
  void unite(int a, int b) { parent_[static_cast<size_t>(find(a))] = find(b); }

 private:
  std::vector<int> parent_;
};

// A graph node during one compile: its own Layer instance, which compiling may rewire (the
// activation/pool swap) and configure (fusion, kernels).
struct CompiledNode {
  std::string name;
  std::unique_ptr<Layer> layer;
  std::vector<ValueId> inputs, outputs;
};

template <typename V>
V& at(std::vector<V>& v, int i) {
  return v[static_cast<size_t>(i)];
}
template <typename V>
const V& at(const std::vector<V>& v, int i) {
  return v[static_cast<size_t>(i)];
}

}  // namespace

Executor::Executor(const Graph& graph, Backend& backend, const CompileOptions& opts)
    : backend_(backend), opts_(opts) {
  if (opts.batch < 1) throw_usage("batch size must be >= 1");
  if (!backend.supports(opts.dtype))
    throw_usage("backend '" + backend.name() + "' does not support dtype " +
                dtype_name(opts.dtype));
  vec_ = backend.vector_ops(opts.dtype);
  build(graph);
  plan_and_bind();
}

Executor::~Executor() = default;

void Executor::build(const Graph& graph) {
  inputs_ = graph.inputs();
  const int n_graph_values = graph.value_count();
  for (int v = 0; v < n_graph_values; ++v) values_.push_back(std::make_unique<Value>());
  auto val = [&](int v) -> Value& { return *values_[static_cast<size_t>(v)]; };

  // Graph inputs.
  for (size_t i = 0; i < inputs_.size(); ++i) {
    Value& v = val(static_cast<int>(i));
    v.name = inputs_[i].name;
    v.shape = inputs_[i].per_sample.with_batch(opts_.batch);
    v.fmt = plain_format(v.shape, inputs_[i].integer ? DType::i32 : opts_.dtype, inputs_[i].layout);
    v.pinned = true;
    v.graph_input = static_cast<int>(i);
    v.needs_grad = opts_.training && opts_.input_grads && !inputs_[i].integer;
  }

  // A fresh layer per node: compiling changes the layers (fusion, kernels), never the graph.
  std::vector<CompiledNode> nodes;
  for (const GraphNode& gn : graph.nodes()) {
    try {
      nodes.push_back(
          {gn.name, find_layer_kind(gn.layer.kind).make(gn.layer.attrs), gn.inputs, gn.outputs});
    } catch (const Error& e) {
      throw Error(e.kind(), "layer '" + gn.name + "' (" + gn.layer.kind + "): " + e.what());
    }
  }
  if (opts_.fuse) {
    // 0. act -> max-pool becomes max-pool -> act for monotone activations: the same values and
    // gradients (max commutes with a non-decreasing function; the argmax is unchanged for a
    // strictly increasing one, and for ReLU ties only among values whose gradient is zero), but
    // the activation's forward and backward touch a tensor 2^d times smaller. CosmoFlow's
    // conv -> LeakyReLU -> MaxPool3D blocks spend ~3% of a 128^3 step in the activation backward
    // otherwise.
    std::vector<int> readers_of(static_cast<size_t>(graph.value_count()), 0);
    for (auto& node : nodes)
      for (ValueId v : node.inputs) ++readers_of[static_cast<size_t>(v)];
    for (ValueId v : graph.outputs()) readers_of[static_cast<size_t>(v)] += 2;
    if (graph.loss() >= 0) readers_of[static_cast<size_t>(graph.loss())] += 2;
    for (size_t b = 0; b + 1 < nodes.size(); ++b) {
      CompiledNode& act = nodes[b];
      CompiledNode& pool = nodes[b + 1];
      const auto e = act.layer->activation();
      const bool monotone = e && ((e->kind == EltwiseKind::leaky_relu && e->alpha > 0) ||
                                  (e->kind == EltwiseKind::relu && e->alpha >= 0) ||
                                  e->kind == EltwiseKind::tanh || e->kind == EltwiseKind::sigmoid);
      if (!monotone || act.inputs.size() != 1 || act.outputs.size() != 1 ||
          pool.inputs.size() != 1 || pool.outputs.size() != 1 || pool.inputs[0] != act.outputs[0] ||
          readers_of[static_cast<size_t>(act.outputs[0])] != 1 ||
          !pool.layer->commutes_with_monotone_activation())
        continue;
      const ValueId x = act.inputs[0], mid = act.outputs[0], y = pool.outputs[0];
      std::swap(act, pool);  // nodes[b] is now the pool, nodes[b + 1] the activation
      nodes[b].inputs = {x};
      nodes[b].outputs = {mid};
      nodes[b + 1].inputs = {mid};
      nodes[b + 1].outputs = {y};
      ++b;
    }
  }

  // 1. Shapes, parameters, gradient needs.
  std::vector<ParamSlot> slots;
  struct Pending {
    CompiledNode* node;
    std::vector<int> param_slots;
  };
  std::vector<Pending> pending;
  for (auto& node : nodes) {
    std::vector<Shape> in_shapes;
    for (ValueId v : node.inputs) in_shapes.push_back(val(v).shape);
    std::vector<Shape> out_shapes;
    try {
      out_shapes = node.layer->infer_shapes(in_shapes);
    } catch (const Error& e) {
      throw Error(e.kind(), "layer '" + node.name + "' (" + node.layer->kind() + "): " + e.what());
    }
    if (out_shapes.size() != node.outputs.size())
      throw_runtime("layer '" + node.name + "' produced " + std::to_string(out_shapes.size()) +
                    " shapes for " + std::to_string(node.outputs.size()) + " outputs");
    Pending p{&node, {}};
    bool has_trainable = false;
    for (const ParamSpec& spec : node.layer->param_specs(in_shapes)) {
      p.param_slots.push_back(static_cast<int>(slots.size()));
      slots.push_back({node.name + "." + spec.name, spec.shape, 0, 0, spec});
      has_trainable |= spec.trainable;
    }
    bool grad = opts_.training && has_trainable;
    for (size_t i = 0; i < node.inputs.size(); ++i)
      grad |= val(node.inputs[i]).needs_grad && !node.layer->input_is_constant(i);
    for (size_t j = 0; j < node.outputs.size(); ++j) {
      Value& o = val(node.outputs[j]);
      o.name = node.name;
      if (node.outputs.size() > 1) o.name.append(":").append(std::to_string(j));
      o.shape = out_shapes[j];
      o.needs_grad = grad;
    }
    pending.push_back(std::move(p));
  }
  params_ = ParamStore(slots, opts_.dtype);
  // ParamStore reorders slots (trainable first): map names back to indices.
  for (auto& p : pending)
    for (int& s : p.param_slots) s = params_.find(at(slots, s).name);
  params_.initialize(opts_.seed);

  // Only values upstream of the loss get gradients.
  if (graph.loss() >= 0) {
    std::vector<bool> reaches(values_.size(), false);
    reaches[static_cast<size_t>(graph.loss())] = true;
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      bool any = false;
      for (ValueId o : it->outputs) any |= reaches[static_cast<size_t>(o)];
      if (any)
        for (size_t i = 0; i < it->inputs.size(); ++i)
          if (!it->layer->input_is_constant(i)) reaches[static_cast<size_t>(it->inputs[i])] = true;
    }
    for (size_t v = 0; v < values_.size(); ++v)
      values_[v]->needs_grad = values_[v]->needs_grad && reaches[v];
  } else {
    for (auto& v : values_) v->needs_grad = false;
  }

  // 2. Fusion: conv -> activation where the activation is the conv output's only reader.
  std::vector<int> readers(values_.size(), 0);
  for (auto& node : nodes)
    for (ValueId v : node.inputs) ++readers[static_cast<size_t>(v)];
  for (ValueId v : graph.outputs()) readers[static_cast<size_t>(v)] += 2;
  std::vector<bool> fused(nodes.size(), false);
  if (opts_.fuse) {
    for (size_t a = 0; a + 1 < nodes.size(); ++a) {
      auto& A = nodes[a];
      if (A.outputs.size() != 1 || readers[static_cast<size_t>(A.outputs[0])] != 1) continue;
      if (A.layer->backward_needs(A.inputs.size(), 1).output[0]) continue;
      for (size_t b = a + 1; b < nodes.size(); ++b) {
        auto& B = nodes[b];
        if (B.inputs.size() != 1 || B.inputs[0] != A.outputs[0]) continue;
        auto act = B.layer->activation();
        if (act && A.layer->fuse_activation(*act, backend_)) {
          B.layer->mark_fused();
          fused[b] = true;
        }
        break;
      }
    }
  }

  // 3. Kernels in order, with reorders where a layer wants another format.
  std::map<std::pair<int, std::string>, int> reordered;  // (value, wanted format) -> value
  auto add_op = [&](std::unique_ptr<Op> op) {
    const int idx = static_cast<int>(ops_.size());
    for (int v : op->in) val(v).consumers.push_back(idx);
    for (int v : op->out) val(v).producer = idx;
    ops_.push_back(std::move(op));
  };
  for (size_t k = 0; k < nodes.size(); ++k) {
    CompiledNode& node = nodes[k];
    auto op = std::make_unique<Op>();
    op->name = node.name;
    op->layer = node.layer.get();
    op->in.assign(node.inputs.begin(), node.inputs.end());
    op->out.assign(node.outputs.begin(), node.outputs.end());
    op->param_slots = pending[k].param_slots;
    op->fused_into_producer = fused[k];
    CreateContext cc{backend_, opts_.dtype, opts_.training, {}, {}, {}, {}, {}, 0, 0};
    for (int v : op->in) {
      cc.in_shapes.push_back(val(v).shape);
      cc.in_formats.push_back(val(v).fmt);
    }
    for (size_t i = 0; i < op->in.size(); ++i)
      cc.need_input_grad.push_back(val(op->in[i]).needs_grad && !node.layer->input_is_constant(i));
    for (int v : op->out) cc.out_shapes.push_back(val(v).shape);
    try {
      node.layer->create(cc);
    } catch (const Error& e) {
      throw Error(e.kind(), "layer '" + node.name + "' (" + node.layer->kind() + "): " + e.what());
    }
    if (cc.out_formats.size() != op->out.size())
      throw_runtime("layer '" + node.name + "' set " + std::to_string(cc.out_formats.size()) +
                    " output formats for " + std::to_string(op->out.size()) + " outputs");
    for (size_t i = 0; i < op->in.size(); ++i) {
      const int v = op->in[i];
      if (cc.in_formats[i] == val(v).fmt) continue;
      const auto key = std::make_pair(v, cc.in_formats[i].str());
      auto found = reordered.find(key);
      if (found == reordered.end()) {
        auto layer = std::make_unique<ReorderLayer>(val(v).fmt, cc.in_formats[i]);
        auto rop = std::make_unique<Op>();
        rop->name = val(v).name + ">reorder";
        rop->layer = layer.get();
        rop->in = {v};
        const int nv = static_cast<int>(values_.size());
        values_.push_back(std::make_unique<Value>());
        val(nv).name = rop->name;
        val(nv).shape = val(v).shape;
        val(nv).needs_grad = val(v).needs_grad;
        rop->out = {nv};
        CreateContext rc{backend_,
                         opts_.dtype,
                         opts_.training,
                         {val(v).shape},
                         {val(v).shape},
                         {val(v).fmt},
                         {},
                         {val(v).needs_grad},
                         0,
                         0};
        layer->create(rc);
        val(nv).fmt = rc.out_formats[0];
        rop->need_input_grad = rc.need_input_grad;
        owned_layers_.push_back(std::move(layer));
        add_op(std::move(rop));
        found = reordered.emplace(key, nv).first;
      }
      op->in[i] = found->second;
    }
    for (size_t j = 0; j < op->out.size(); ++j) val(op->out[j]).fmt = cc.out_formats[j];
    op->need_input_grad = cc.need_input_grad;
    op->workspace_bytes = cc.workspace_bytes;
    op->scratch_bytes = cc.scratch_bytes;
    if (node.layer->is_loss()) loss_op_ = static_cast<int>(ops_.size());
    add_op(std::move(op));
  }

  // Marked outputs must be readable without a backend: reorder blocked ones to plain.
  graph_to_internal_.resize(static_cast<size_t>(n_graph_values));
  std::iota(graph_to_internal_.begin(), graph_to_internal_.end(), 0);
  for (ValueId g : graph.outputs()) {
    Value& v = val(g);
    if (v.fmt.layout == Layout::blocked) {
      MemFormat plain = plain_format(v.shape, v.fmt.dtype);
      auto layer = std::make_unique<ReorderLayer>(v.fmt, plain);
      auto rop = std::make_unique<Op>();
      rop->name = v.name + ">plain";
      rop->layer = layer.get();
      rop->in = {g};
      const int nv = static_cast<int>(values_.size());
      values_.push_back(std::make_unique<Value>());
      val(nv).name = rop->name;
      val(nv).shape = val(g).shape;
      val(nv).fmt = plain;
      rop->out = {nv};
      CreateContext rc{backend_,
                       opts_.dtype,
                       opts_.training,
                       {plain.shape},
                       {plain.shape},
                       {val(g).fmt},
                       {},
                       {false},
                       0,
                       0};
      layer->create(rc);
      rop->need_input_grad = {false};
      owned_layers_.push_back(std::move(layer));
      add_op(std::move(rop));
      graph_to_internal_[static_cast<size_t>(g)] = nv;
      val(nv).pinned = true;
    } else {
      v.pinned = true;
    }
  }
  for (auto& node : nodes) owned_layers_.push_back(std::move(node.layer));
  if (graph.loss() >= 0) val(graph.loss()).pinned = true;
  if (graph.loss() >= 0 && loss_op_ < 0)
    throw_usage("the graph's loss value is not produced by a loss layer");

  // Backward bookkeeping per op.
  for (auto& op : ops_) {
    op->needs = op->layer->backward_needs(op->in.size(), op->out.size());
    bool any_in_grad = false;
    for (bool b : op->need_input_grad) any_in_grad |= b;
    bool has_trainable = false;
    for (int s : op->param_slots)
      has_trainable |= params_.slots()[static_cast<size_t>(s)].spec.trainable;
    bool outputs_have_grad = op->layer->is_loss();
    for (int v : op->out) outputs_have_grad |= val(v).needs_grad;
    op->run_backward = opts_.training && outputs_have_grad && (any_in_grad || has_trainable);
    // Loss layers start backward from their inputs; everyone else from their outputs' gradient.
    op->flops = op->layer->flops(
        [&] {
          std::vector<Shape> s;
          for (int v : op->in) s.push_back(val(v).shape);
          return s;
        }(),
        [&] {
          std::vector<Shape> s;
          for (int v : op->out) s.push_back(val(v).shape);
          return s;
        }());
  }
  finished_in_backward_.assign(params_.slots().size(), false);
  for (const auto& op : ops_)
    if (op->run_backward)
      for (int s : op->param_slots) finished_in_backward_[static_cast<size_t>(s)] = true;
}

void Executor::plan_and_bind() {
  auto val = [&](int v) -> Value& { return *values_[static_cast<size_t>(v)]; };
  const int n = static_cast<int>(ops_.size());
  const int end = opts_.training ? 2 * n : n;
  auto tf = [&](int i) { return i; };
  auto tb = [&](int i) { return 2 * n - 1 - i; };
  const size_t nv = values_.size();

  // 4a. Storage sharing. Items 0..nv-1 are forward values, nv..2nv-1 their gradients.
  UnionFind uf(2 * nv);
  std::vector<int> group_size(2 * nv, 1);
  auto single_reader = [&](int v) { return val(v).consumers.size() == 1 && !val(v).pinned; };
  for (int i = 0; i < n; ++i) {
    Op& op = *ops_[static_cast<size_t>(i)];
    if (op.in.empty() || op.out.empty()) continue;
    const int x = op.in[0], y = op.out[0];
    if (val(x).fmt.bytes != val(y).fmt.bytes || val(y).pinned) continue;
    bool share = false;
    if (op.needs.view) {
      share = true;
    } else if (op.needs.inplace) {
      // Overwriting x is safe only if nothing else reads it and its producer's backward
      // does not need it, and x is not itself a view of something still alive.
      const int p = val(x).producer;
      const bool producer_needs = p >= 0 && ops_[static_cast<size_t>(p)]->needs.output[0];
      share = single_reader(x) && !producer_needs && val(x).graph_input < 0 &&
              group_size[static_cast<size_t>(uf.find(x))] == 1;
    }
    if (op.fused_into_producer && !share)
      throw_runtime("internal error: fused activation '" + op.name + "' cannot run in place");
    if (share) {
      const int gs = group_size[static_cast<size_t>(uf.find(x))] + 1;
      uf.unite(y, x);
      group_size[static_cast<size_t>(uf.find(x))] = gs;
      op.inplace = true;
      if (val(x).needs_grad && val(y).needs_grad && val(x).consumers.size() == 1) {
        uf.unite(static_cast<int>(nv) + y, static_cast<int>(nv) + x);
        op.grad_inplace = true;
      }
    }
  }

  // 4b. Lifetimes of every item.
  std::vector<int> first(2 * nv, end), last(2 * nv, -1);
  std::vector<bool> used(2 * nv, false);
  auto touch = [&](size_t item, int t) {
    used[item] = true;
    first[item] = std::min(first[item], t);
    last[item] = std::max(last[item], t);
  };
  for (size_t v = 0; v < nv; ++v) {
    Value& x = *values_[v];
    if (x.pinned) {
      touch(v, 0);
      touch(v, end - 1);
    }
    if (x.producer >= 0) touch(v, tf(x.producer));
    for (int c : x.consumers) touch(v, tf(c));
    if (!opts_.training) continue;
    for (int c : x.consumers) {
      const Op& op = *ops_[static_cast<size_t>(c)];
      if (!op.run_backward) continue;
      for (size_t i = 0; i < op.in.size(); ++i)
        if (op.in[i] == static_cast<int>(v) && op.needs.input[i]) touch(v, tb(c));
    }
    if (x.producer >= 0) {
      const Op& op = *ops_[static_cast<size_t>(x.producer)];
      for (size_t j = 0; j < op.out.size(); ++j)
        if (op.out[j] == static_cast<int>(v) && op.run_backward && op.needs.output[j])
          touch(v, tb(x.producer));
    }
    // Gradient: written by the last reader's backward, read by the producer's backward.
    if (x.needs_grad) {
      const size_t g = nv + v;
      for (int c : x.consumers)
        if (ops_[static_cast<size_t>(c)]->run_backward) touch(g, tb(c));
      if (x.producer >= 0 && ops_[static_cast<size_t>(x.producer)]->run_backward)
        touch(g, tb(x.producer));
      if (x.graph_input >= 0) touch(g, end - 1);
    }
  }

  // Group items into blocks.
  plan_ = MemoryPlan{};
  std::map<int, int> block_of_root;
  for (size_t item = 0; item < 2 * nv; ++item) {
    if (!used[item]) continue;
    const int root = uf.find(static_cast<int>(item));
    const Value& x = *values_[item % nv];
    auto it = block_of_root.find(root);
    if (it == block_of_root.end()) {
      it = block_of_root.emplace(root, static_cast<int>(plan_.blocks.size())).first;
      plan_.blocks.push_back({(item >= nv ? "grad " : "") + x.name, 0, first[item], last[item], 0});
    }
    PlanBlock& b = plan_.blocks[static_cast<size_t>(it->second)];
    b.bytes = std::max(b.bytes, x.fmt.bytes);
    b.first = std::min(b.first, first[item]);
    b.last = std::max(b.last, last[item]);
    if (item < nv)
      values_[item]->storage = it->second;
    else
      values_[item - nv]->grad_storage = it->second;
  }
  // Workspaces (forward to backward) and temporary gradients of values with several readers.
  size_t scratch = 0;
  for (int i = 0; i < n; ++i) {
    Op& op = *ops_[static_cast<size_t>(i)];
    scratch = std::max(scratch, op.scratch_bytes);
    if (op.workspace_bytes) {
      op.workspace_block = static_cast<int>(plan_.blocks.size());
      plan_.blocks.push_back(
          {op.name + ":workspace", op.workspace_bytes, tf(i), op.run_backward ? tb(i) : tf(i), 0});
    }
    op.temp_grad_block.assign(op.in.size(), -1);
  }
  if (opts_.training) {
    for (size_t v = 0; v < nv; ++v) {
      Value& x = *values_[v];
      if (!x.needs_grad) continue;
      // Readers in backward order; the first writes the gradient, the rest go through temps.
      std::vector<std::pair<int, size_t>> slots_in_order;
      for (int c = n - 1; c >= 0; --c) {
        const Op& op = *ops_[static_cast<size_t>(c)];
        if (!op.run_backward) continue;
        for (size_t i = 0; i < op.in.size(); ++i)
          if (op.in[i] == static_cast<int>(v) && op.need_input_grad[i])
            slots_in_order.push_back({c, i});
      }
      for (size_t k = 1; k < slots_in_order.size(); ++k) {
        auto [c, i] = slots_in_order[k];
        Op& op = *ops_[static_cast<size_t>(c)];
        const int blk = static_cast<int>(plan_.blocks.size());
        plan_.blocks.push_back({"grad " + x.name + " partial", x.fmt.bytes, tb(c), tb(c), 0});
        op.temp_grad_block[i] = blk;
        op.accum.push_back({static_cast<int>(v), blk});
      }
    }
  }
  plan_memory(plan_);
  plan_.scratch_bytes = scratch;
  const size_t scratch_offset = align_up(plan_.arena_bytes, 256);
  arena_ = Buffer(scratch_offset + std::max<size_t>(scratch, 256) + 256);
  char* base = static_cast<char*>(arena_.data());
  auto ptr = [&](int block) -> void* {
    return block < 0 ? nullptr : base + plan_.blocks[static_cast<size_t>(block)].offset;
  };

  // 5. Run contexts.
  profile_.clear();
  for (int i = 0; i < n; ++i) {
    Op& op = *ops_[static_cast<size_t>(i)];
    RunContext& c = op.ctx;
    c = RunContext{};
    for (int v : op.in) c.in.push_back(ptr(val(v).storage));
    for (int v : op.out) c.out.push_back(ptr(val(v).storage));
    for (int v : op.out)
      c.diff_out.push_back(val(v).needs_grad ? ptr(val(v).grad_storage) : nullptr);
    for (size_t k = 0; k < op.in.size(); ++k) {
      void* d = nullptr;
      if (op.run_backward && op.need_input_grad[k])
        d = op.temp_grad_block[k] >= 0 ? ptr(op.temp_grad_block[k])
                                       : ptr(val(op.in[k]).grad_storage);
      c.diff_in.push_back(d);
    }
    for (int s : op.param_slots) {
      c.params.push_back(params_.value(static_cast<size_t>(s)).data());
      c.grads.push_back(params_.grad(static_cast<size_t>(s)).data());
    }
    c.workspace = ptr(op.workspace_block);
    c.scratch = base + scratch_offset;
    c.vec = vec_.get();
    c.training = opts_.training;
    profile_.push_back({op.name, op.layer->kind(), 0, 0, op.flops});
  }
}

TensorView Executor::input(const std::string& name) const {
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (inputs_[i].name == name) {
      const Value& v = *values_[i];
      void* planned =
          static_cast<char*>(arena_.data()) + plan_.blocks[static_cast<size_t>(v.storage)].offset;
      void* data = i < input_bindings_.size() && input_bindings_[i]
                       ? const_cast<void*>(input_bindings_[i])
                       : planned;
      return TensorView(data, {v.shape, v.fmt.dtype, backend_.device(), v.fmt.layout});
    }
  throw_usage("the model has no input named '" + name + "'");
}

bool Executor::bind_input(const std::string& name, const void* data) {
  size_t i = 0;
  while (i < inputs_.size() && inputs_[i].name != name) ++i;
  if (i == inputs_.size()) throw_usage("the model has no input named '" + name + "'");
  const Value& v = *values_[i];
  for (size_t u = 0; u < values_.size(); ++u)
    if (u != i && values_[u]->storage == v.storage) return false;
  const void* p = data ? data
                       : static_cast<char*>(arena_.data()) +
                             plan_.blocks[static_cast<size_t>(v.storage)].offset;
  for (auto& op : ops_)
    for (size_t k = 0; k < op->in.size(); ++k)
      if (op->in[k] == static_cast<int>(i)) op->ctx.in[k] = p;
  input_bindings_.resize(inputs_.size(), nullptr);
  input_bindings_[i] = data;
  return true;
}

TensorView Executor::input_grad(const std::string& name) const {
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (inputs_[i].name == name) {
      const Value& v = *values_[i];
      if (v.grad_storage < 0) throw_usage("no gradient is computed for input '" + name + "'");
      return TensorView(static_cast<char*>(arena_.data()) +
                            plan_.blocks[static_cast<size_t>(v.grad_storage)].offset,
                        {v.shape, v.fmt.dtype, backend_.device(), v.fmt.layout});
    }
  throw_usage("the model has no input named '" + name + "'");
}

TensorView Executor::output(ValueId g) const {
  if (g < 0 || static_cast<size_t>(g) >= graph_to_internal_.size()) throw_usage("no such value");
  const Value& v = *values_[static_cast<size_t>(graph_to_internal_[static_cast<size_t>(g)])];
  if (!v.pinned || v.storage < 0) throw_usage("value '" + v.name + "' was not marked as an output");
  return TensorView(
      static_cast<char*>(arena_.data()) + plan_.blocks[static_cast<size_t>(v.storage)].offset,
      {v.shape, v.fmt.dtype, backend_.device(), v.fmt.layout});
}

double Executor::forward(bool training) {
  using clock = std::chrono::steady_clock;
  training = training && opts_.training;
  if (training) ++step_;
  // A different dropout mask every step and every layer, reproducible from the seed.
  const uint64_t step_seed =
      (opts_.seed + 0x9E3779B97F4A7C15ull) * (step_ * 0xBF58476D1CE4E5B9ull + 1);
  for (size_t i = 0; i < ops_.size(); ++i) {
    Op& op = *ops_[i];
    op.ctx.seed = step_seed ^ (i * 0x94D049BB133111EBull);
    op.ctx.training = training;
    if (profiling_) {
      const auto t0 = clock::now();
      op.layer->forward(op.ctx);
      profile_[i].forward_s += std::chrono::duration<double>(clock::now() - t0).count();
    } else {
      op.layer->forward(op.ctx);
    }
  }
  if (loss_op_ < 0) return 0.0;
  data_loss_ = ops_[static_cast<size_t>(loss_op_)]->ctx.loss;
  double penalty = 0;
  for (size_t s = 0; s < params_.slots().size(); ++s) {
    const auto& slot = params_.slots()[s];
    if (slot.spec.l2 > 0)
      penalty += slot.spec.l2 * vec_->sum_squares(params_.value(s).data(), slot.count);
  }
  return data_loss_ + penalty;
}

void Executor::backward() {
  if (!opts_.training) throw_usage("backward() on an executor compiled for inference");
  using clock = std::chrono::steady_clock;
  auto val = [&](int v) -> Value& { return *values_[static_cast<size_t>(v)]; };
  char* base = static_cast<char*>(arena_.data());
  for (size_t k = ops_.size(); k-- > 0;) {
    Op& op = *ops_[k];
    if (!op.run_backward) continue;
    const auto t0 = profiling_ ? clock::now() : clock::time_point{};
    op.layer->backward(op.ctx);
    for (const auto& a : op.accum) {
      void* g = base + plan_.blocks[static_cast<size_t>(val(a.value).grad_storage)].offset;
      const void* t = base + plan_.blocks[static_cast<size_t>(a.temp_block)].offset;
      vec_->add(g, t, g, val(a.value).fmt.bytes / dtype_size(val(a.value).fmt.dtype));
    }
    if (profiling_)
      profile_[k].backward_s += std::chrono::duration<double>(clock::now() - t0).count();
    // This op's parameter gradients are final now (one op owns each parameter): add the L2
    // term and hand them on, so a gradient bucket can start communicating while backward goes on.
    // Last slot first (bias before weight): all of an op's gradients are done at once, and this
    // order walks the flat buffer downwards, so gradient buckets are contiguous slices.
    for (auto it = op.param_slots.rbegin(); it != op.param_slots.rend(); ++it) finish_gradient(*it);
  }
  // Parameters of ops that run no backward (none in the models so far) keep the old rule.
  for (size_t s = 0; s < params_.slots().size(); ++s)
    if (!finished_in_backward_[s]) finish_gradient(static_cast<int>(s));
}

void Executor::finish_gradient(int s) {
  const auto& slot = params_.slots()[static_cast<size_t>(s)];
  if (!slot.spec.trainable) return;
  if (slot.spec.l2 > 0)
    vec_->axpy(2.0 * slot.spec.l2, params_.value(static_cast<size_t>(s)).data(),
               params_.grad(static_cast<size_t>(s)).data(), slot.count);
  if (gradient_ready_) gradient_ready_(s);
}

std::vector<int> Executor::gradient_ready_order() const {
  std::vector<int> order;
  for (size_t k = ops_.size(); k-- > 0;)
    if (ops_[k]->run_backward)
      for (auto it = ops_[k]->param_slots.rbegin(); it != ops_[k]->param_slots.rend(); ++it)
        if (params_.slots()[static_cast<size_t>(*it)].spec.trainable) order.push_back(*it);
  for (size_t s = 0; s < params_.slots().size(); ++s)
    if (!finished_in_backward_[s] && params_.slots()[s].spec.trainable)
      order.push_back(static_cast<int>(s));
  return order;
}

double Executor::forward_flops() const {
  double f = 0;
  for (const auto& op : ops_) f += op->flops.forward;
  return f;
}

double Executor::training_flops() const {
  double f = 0;
  for (const auto& op : ops_) {
    f += op->flops.forward;
    if (op->run_backward) {
      bool data = false;
      for (bool b : op->need_input_grad) data |= b;
      f += op->flops.backward_weights + (data ? op->flops.backward_data : 0.0);
    }
  }
  return f;
}

void Executor::reset_profile() {
  for (auto& p : profile_) p.forward_s = p.backward_s = 0;
}

std::string Executor::summary() const {
  std::ostringstream os;
  os << std::left << std::setw(24) << "layer" << std::setw(16) << "kind" << std::setw(26)
     << "output" << std::setw(22) << "format" << std::right << std::setw(12) << "params"
     << "  notes\n";
  int64_t total = 0;
  for (const auto& op : ops_) {
    int64_t np = 0;
    for (int s : op->param_slots)
      np += static_cast<int64_t>(params_.slots()[static_cast<size_t>(s)].count);
    total += np;
    const Value& out = *values_[static_cast<size_t>(op->out.at(0))];
    std::string fmt = out.fmt.layout == Layout::blocked && out.fmt.opaque
                          ? out.fmt.opaque->name()
                          : layout_name(out.fmt.layout);
    std::string notes = op->layer->describe();
    if (op->inplace) notes += notes.empty() ? "in place" : ", in place";
    os << std::left << std::setw(24) << op->name.substr(0, 23) << std::setw(16) << op->layer->kind()
       << std::setw(26) << out.shape.str() << std::setw(22) << fmt << std::right << std::setw(12)
       << np << "  " << notes << "\n";
  }
  os << "parameters: " << total << " (" << human_bytes(static_cast<double>(params_.bytes()))
     << ")\n";
  os << "activation arena: " << human_bytes(static_cast<double>(plan_.arena_bytes)) << " planned ("
     << human_bytes(static_cast<double>(plan_.naive_bytes)) << " without reuse), scratch "
     << human_bytes(static_cast<double>(plan_.scratch_bytes)) << "\n";
  return os.str();
}

}  // namespace crest
