// A pipeline's stages and the whole model's state on rank 0 (PipelineTrainingSession::
// gather_whole, scatter_whole): each stage's parameters and optimizer state travel as one message
// of named tensors, so the stage's and the whole store's layouts (their slot orders and padding)
// need not agree.
#include <cstring>
#include <map>

#include "crest/core/error.hpp"
#include "crest/engine/pipeline_training_session.hpp"
#include "crest/engine/whole_parts.hpp"
#include "crest/graph/param_shard.hpp"

namespace crest {

namespace {

constexpr int kStateTag = 0x7e57a7e;

// A store's tensor: a parameter's values (state "") or its optimizer state `state`. Its name in
// messages is the state and the parameter's name, '\0' between them. Messages carry whole
// tensors: a spatial group's divided parameter (`shard`) travels as the `whole` its group's first
// rank gathered, and is cut into each rank's part on arrival.
struct NamedTensor {
  std::string state, param;
  std::byte* data = nullptr;
  size_t bytes = 0;
  const ParamShard* shard = nullptr;
  const std::byte* whole = nullptr;  // a divided parameter's gathered whole (packing), or null
  size_t whole_bytes = 0;
  std::string name() const { return state + '\0' + param; }
};

std::vector<NamedTensor> named_tensors(const ParamStore& params, Optimizer& optimizer,
                                       const WholeParts* wholes = nullptr) {
  CREST_CHECK(params.memory().is_host(), "pipeline state on a device");
  const size_t element = dtype_size(params.dtype());
  std::vector<NamedTensor> out;
  auto add = [&](const std::string& state, void* base, size_t s) {
    const ParamSlot& slot = params.slots()[s];
    NamedTensor t{state, slot.name, static_cast<std::byte*>(base) + slot.offset,
                  slot.count * element};
    if (slot.spec.shard) {
      t.shard = slot.spec.shard.get();
      t.whole = wholes ? wholes->find(s, state) : nullptr;
      t.whole_bytes = static_cast<size_t>(file_shape(slot).numel()) * element;
    }
    out.push_back(t);
  };
  for (size_t s = 0; s < params.slots().size(); ++s) add("", params.values(), s);
  for (const auto& [state, buffer] : optimizer.state())
    for (size_t s = 0; s < params.slots().size(); ++s)
      if (params.slots()[s].spec.trainable) add(state, buffer->data(), s);
  return out;
}

void put_bytes(std::vector<std::byte>& out, const void* data, size_t bytes) {
  const size_t at = out.size();
  out.resize(at + bytes);
  if (bytes > 0) std::memcpy(out.data() + at, data, bytes);
}

template <typename T>
void put(std::vector<std::byte>& out, const T& v) {
  put_bytes(out, &v, sizeof v);
}

// The counters first (executor steps, optimizer steps), then each tensor: its name's length, the
// name, its byte count and its bytes.
std::vector<std::byte> pack(const std::vector<NamedTensor>& tensors, uint64_t executor_steps,
                            int64_t optimizer_steps) {
  std::vector<std::byte> out;
  put(out, executor_steps);
  put(out, optimizer_steps);
  for (const NamedTensor& t : tensors) {
    CREST_CHECK(!t.shard || t.whole, "pipeline state: a divided parameter not gathered whole");
    const std::string name = t.name();
    put(out, static_cast<uint64_t>(name.size()));
    put_bytes(out, name.data(), name.size());
    put(out, static_cast<uint64_t>(t.shard ? t.whole_bytes : t.bytes));
    put_bytes(out, t.shard ? t.whole : t.data, t.shard ? t.whole_bytes : t.bytes);
  }
  return out;
}

class Reader {
 public:
  explicit Reader(const std::vector<std::byte>& in) : in_(in) {}
  template <typename T>
  T get() {
    T v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  const std::byte* take(size_t n) {
    CREST_CHECK(at_ + n <= in_.size(), "a pipeline state message ends early");
    const std::byte* p = in_.data() + at_;
    at_ += n;
    return p;
  }
  bool done() const { return at_ == in_.size(); }

 private:
  const std::vector<std::byte>& in_;
  size_t at_ = 0;
};

struct Counters {
  uint64_t executor_steps = 0;
  int64_t optimizer_steps = 0;
};

// Copies every tensor of `message` into the tensor of the same name and size in `into` (a
// divided parameter: its part of the whole tensor the message holds).
Counters unpack(const std::vector<std::byte>& message, const std::vector<NamedTensor>& into,
                DType dtype) {
  std::map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& t : into) by_name[t.name()] = &t;
  Reader r(message);
  Counters c{r.get<uint64_t>(), r.get<int64_t>()};
  while (!r.done()) {
    const auto length = r.get<uint64_t>();
    const auto* n = reinterpret_cast<const char*>(r.take(length));
    const std::string name(n, length);
    const auto bytes = r.get<uint64_t>();
    const auto it = by_name.find(name);
    const NamedTensor* t = it == by_name.end() ? nullptr : it->second;
    CREST_CHECK(t && (t->shard ? t->whole_bytes : t->bytes) == bytes,
                "pipeline state: no tensor '" + name.substr(name.find('\0') + 1) + "' (" +
                    name.substr(0, name.find('\0')) + ") of that size");
    if (t->shard)
      t->shard->take_part(r.take(bytes), t->data, dtype);
    else
      std::memcpy(t->data, r.take(bytes), bytes);
  }
  return c;
}

// Which stage holds each parameter: the stage of the layer whose name, with a '.', is the
// longest start of the parameter's ("<layer>.<param>"; a layer's name may hold dots itself).
class ParamOwners {
 public:
  explicit ParamOwners(const std::vector<PipelineStageGraph>& graphs) {
    for (size_t s = 0; s < graphs.size(); ++s)
      for (const GraphNode& n : graphs[s].graph.nodes())
        stage_of_layer_[n.name] = static_cast<int>(s);
  }
  int stage_of(const std::string& param) const {
    for (size_t dot = param.rfind('.'); dot != std::string::npos && dot > 0;
         dot = param.rfind('.', dot - 1)) {
      const auto it = stage_of_layer_.find(param.substr(0, dot));
      if (it != stage_of_layer_.end()) return it->second;
    }
    CREST_CHECK(false, "pipeline state: no stage holds the layer of parameter '" + param + "'");
    return 0;
  }

 private:
  std::map<std::string, int> stage_of_layer_;
};

}  // namespace

// Replica 0's stages send, each from its group's first rank (which holds the divided
// parameters' wholes).
void PipelineTrainingSession::gather_whole(Communicator& world) {
  Executor& ex = executor();
  const ParamStore& params = ex.params();
  const WholeParts wholes = params.divided() ? WholeParts(params, optimizer_.get()) : WholeParts();
  const bool sends = ranks_.replica == 0 && ranks_.place == 0;
  const std::vector<std::byte> mine = sends ? pack(named_tensors(params, *optimizer_, &wholes),
                                                   ex.training_steps(), optimizer_->steps_taken())
                                            : std::vector<std::byte>{};
  if (world.rank() != 0) {
    if (sends) world.send(0, kStateTag, mine);
    return;
  }
  Executor& whole = whole_.executor();
  const DType dtype = whole.params().dtype();
  const std::vector<NamedTensor> into = named_tensors(whole.params(), *whole_optimizer_);
  Counters c = unpack(mine, into, dtype);
  for (int s = 1; s < ranks_.stages; ++s)
    c = unpack(world
                   .receive(s * ranks_.group_size, kStateTag, 600,
                            "the pipeline stages' state for a checkpoint")
                   .bytes,
               into, dtype);
  whole.set_training_steps(c.executor_steps);
  whole_optimizer_->set_steps_taken(c.optimizer_steps);
}

void PipelineTrainingSession::scatter_whole(Communicator& world) {
  Executor& ex = executor();
  const std::vector<NamedTensor> mine = named_tensors(ex.params(), *optimizer_);
  std::vector<std::byte> message;
  if (world.rank() == 0) {
    const Executor& whole = whole_.executor();
    const std::vector<NamedTensor> all = named_tensors(whole.params(), *whole_optimizer_);
    // Each stage's part, packed once for all its ranks.
    const ParamOwners owners(graphs_);
    std::vector<std::vector<NamedTensor>> parts(static_cast<size_t>(ranks_.stages));
    for (const NamedTensor& t : all)
      parts[static_cast<size_t>(owners.stage_of(t.param))].push_back(t);
    std::vector<std::vector<std::byte>> per_stage;
    per_stage.reserve(parts.size());
    for (const auto& part : parts)
      per_stage.push_back(pack(part, whole.training_steps(), whole_optimizer_->steps_taken()));
    for (int r = 1; r < world.size(); ++r)
      world.send(r, kStateTag,
                 per_stage[static_cast<size_t>((r / ranks_.group_size) % ranks_.stages)]);
    message = std::move(per_stage[0]);
  } else {
    message =
        world.receive(0, kStateTag, 600, "the pipeline stage's state from a checkpoint").bytes;
  }
  const Counters c = unpack(message, mine, ex.params().dtype());
  ex.set_training_steps(c.executor_steps);
  optimizer_->set_steps_taken(c.optimizer_steps);
}

}  // namespace crest
