// Storage sharing, lifetimes and the memory plan. Element-wise layers that need only their
// output run in place (input read by nobody else, not needed by its producer's backward),
// flatten is a view. Every remaining tensor, gradient, workspace and temporary gradient (for
// values read by several layers, summed after each reader's backward) gets a lifetime on the
// schedule forward 0..n-1, backward n..2n-1; plan_memory places the blocks.
#include <map>
#include <numeric>

#include "compile/program.hpp"
#include "crest/core/error.hpp"

namespace crest::compile {
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

// The planner's state: items 0..nv-1 are forward values, nv..2nv-1 their gradients; items that
// share storage are united; each item gets a lifetime on the schedule.
struct StoragePlanner {
  explicit StoragePlanner(Program& prog)
      : p(prog),
        n(static_cast<int>(prog.ops.size())),
        end(prog.opts.training ? 2 * n : n),
        nv(prog.values.size()),
        uf(2 * nv),
        group_size(2 * nv, 1),
        first(2 * nv, end),
        last(2 * nv, -1),
        used(2 * nv, false) {}

  Value& val(int v) { return p.val(v); }
  int tf(int i) const { return i; }
  int tb(int i) const { return 2 * n - 1 - i; }
  void touch(size_t item, int t) {
    used[item] = true;
    first[item] = std::min(first[item], t);
    last[item] = std::max(last[item], t);
  }

  // In-place element-wise layers and views share their input's storage (and gradient).
  void share_storage() {
    auto single_reader = [&](int v) { return val(v).consumers.size() == 1 && !val(v).pinned; };
    for (int i = 0; i < n; ++i) {
      Op& op = *p.ops[static_cast<size_t>(i)];
      if (op.in.empty() || op.out.empty()) continue;
      const int x = op.in[0], y = op.out[0];
      const bool can_share = val(x).fmt.bytes == val(y).fmt.bytes && !val(y).pinned;
      if (op.fused_into_producer && !can_share)
        throw_runtime("internal error: fused activation '" + op.name +
                      "' has an output of its own");
      if (!can_share) continue;
      bool share = false;
      if (op.needs.view) {
        share = true;
      } else if (op.needs.inplace) {
        // Overwriting x is safe only if nothing else reads it and its producer's backward
        // does not need it, and x is not itself a view of something still alive.
        const int prod = val(x).producer;
        const bool producer_needs =
            prod >= 0 && p.op(prod).run_backward && p.op(prod).needs.output[0];
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
  }

  // First and last schedule step at which each item is read or written.
  void lifetimes() {
    for (size_t v = 0; v < nv; ++v) {
      Value& x = *p.values[v];
      // Pinned values live the whole step; an inference program's inputs only until their last
      // reader (the caller writes them before the next pass, and nothing reads them backward).
      if (x.pinned) {
        touch(v, 0);
        if (p.opts.training || x.graph_input < 0 || x.consumers.empty()) touch(v, end - 1);
      }
      if (x.producer >= 0) touch(v, tf(x.producer));
      for (int c : x.consumers) touch(v, tf(c));
      if (!p.opts.training) continue;
      for (int c : x.consumers) {
        const Op& op = *p.ops[static_cast<size_t>(c)];
        if (!op.run_backward) continue;
        for (size_t i = 0; i < op.in.size(); ++i)
          if (op.in[i] == static_cast<int>(v) && op.needs.input[i]) touch(v, tb(c));
      }
      if (x.producer >= 0) {
        const Op& op = *p.ops[static_cast<size_t>(x.producer)];
        for (size_t j = 0; j < op.out.size(); ++j)
          if (op.out[j] == static_cast<int>(v) && op.run_backward && op.needs.output[j])
            touch(v, tb(x.producer));
      }
      // Gradient: written by the last reader's backward, read by the producer's backward.
      if (x.needs_grad) {
        const size_t g = nv + v;
        for (int c : x.consumers)
          if (p.ops[static_cast<size_t>(c)]->run_backward) touch(g, tb(c));
        if (x.producer >= 0 && p.ops[static_cast<size_t>(x.producer)]->run_backward)
          touch(g, tb(x.producer));
        if (x.graph_input >= 0) touch(g, end - 1);
      }
    }
  }

  // One plan block per group of items that share storage.
  void group_into_blocks() {
    p.plan = MemoryPlan{};
    std::map<int, int> block_of_root;
    for (size_t item = 0; item < 2 * nv; ++item) {
      if (!used[item]) continue;
      const int root = uf.find(static_cast<int>(item));
      const Value& x = *p.values[item % nv];
      auto it = block_of_root.find(root);
      if (it == block_of_root.end()) {
        it = block_of_root.emplace(root, static_cast<int>(p.plan.blocks.size())).first;
        p.plan.blocks.push_back(
            {(item >= nv ? "grad " : "") + x.name, 0, first[item], last[item], 0});
      }
      PlanBlock& b = p.plan.blocks[static_cast<size_t>(it->second)];
      b.bytes = std::max(b.bytes, x.fmt.bytes);
      b.first = std::min(b.first, first[item]);
      b.last = std::max(b.last, last[item]);
      if (item < nv)
        p.values[item]->storage = it->second;
      else
        p.values[item - nv]->grad_storage = it->second;
    }
  }

  // Workspaces (forward to backward), scratch (one call) and temporary gradients of values with
  // several readers.
  void add_workspaces_and_partial_gradients() {
    size_t scratch = 0;
    for (int i = 0; i < n; ++i) {
      Op& op = *p.ops[static_cast<size_t>(i)];
      scratch = std::max(scratch, op.scratch_bytes);
      if (op.scratch_bytes) {
        op.forward_scratch_block = static_cast<int>(p.plan.blocks.size());
        p.plan.blocks.push_back({op.name + ":scratch", op.scratch_bytes, tf(i), tf(i), 0});
        if (op.run_backward) {
          op.backward_scratch_block = static_cast<int>(p.plan.blocks.size());
          p.plan.blocks.push_back(
              {op.name + ":backward scratch", op.scratch_bytes, tb(i), tb(i), 0});
        }
      }
      if (op.workspace_bytes) {
        op.workspace_block = static_cast<int>(p.plan.blocks.size());
        p.plan.blocks.push_back({op.name + ":workspace", op.workspace_bytes, tf(i),
                                 op.run_backward ? tb(i) : tf(i), 0});
      }
      op.temp_grad_block.assign(op.in.size(), -1);
    }
    if (p.opts.training) {
      for (size_t v = 0; v < nv; ++v) {
        Value& x = *p.values[v];
        if (!x.needs_grad) continue;
        // Readers in backward order; the first writes the gradient, the rest go through temps.
        std::vector<std::pair<int, size_t>> slots_in_order;
        for (int c = n - 1; c >= 0; --c) {
          const Op& op = *p.ops[static_cast<size_t>(c)];
          if (!op.run_backward) continue;
          for (size_t i = 0; i < op.in.size(); ++i)
            if (op.in[i] == static_cast<int>(v) && op.need_input_grad[i])
              slots_in_order.emplace_back(c, i);
        }
        for (size_t k = 1; k < slots_in_order.size(); ++k) {
          auto [c, i] = slots_in_order[k];
          Op& op = *p.ops[static_cast<size_t>(c)];
          const int blk = static_cast<int>(p.plan.blocks.size());
          p.plan.blocks.push_back({"grad " + x.name + " partial", x.fmt.bytes, tb(c), tb(c), 0});
          op.temp_grad_block[i] = blk;
          op.accum.push_back({static_cast<int>(v), blk});
        }
      }
    }
    p.plan.scratch_bytes = scratch;
  }

  Program& p;
  const int n, end;
  const size_t nv;
  UnionFind uf;
  std::vector<int> group_size;
  std::vector<int> first, last;
  std::vector<bool> used;
};

}  // namespace

void plan_storage(Program& p) {
  StoragePlanner planner(p);
  planner.share_storage();
  planner.lifetimes();
  planner.group_into_blocks();
  planner.add_workspaces_and_partial_gradients();
  plan_memory(p.plan);
}

}  // namespace crest::compile
