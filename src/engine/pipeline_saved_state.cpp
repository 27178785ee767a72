// A pipeline's whole model state, as one process would hold it, without any rank holding it:
// checkpoints and weight files are written by the job's rank 0 asking replica 0's stages for each
// tensor in turn (PipelineSavedState::provide), and a resume sends every rank its stage's tensors
// from the file rank 0 verified (PipelineTrainingSession::load_state). Tensors travel by name, so
// the stage's and the whole model's layouts (their slot orders and padding) need not agree.
#include <cstring>
#include <map>

#include "crest/core/error.hpp"
#include "crest/core/host_staging.hpp"
#include "crest/engine/pipeline_training_session.hpp"
#include "crest/engine/whole_parts.hpp"
#include "crest/graph/param_shard.hpp"

namespace crest {

namespace {

constexpr int kRequestTag = 0x7e57a7e, kReplyTag = 0x7e57a7f, kLoadTag = 0x7e57a80;
// A stage serving rank 0 waits for each request while rank 0 writes the tensor before it.
constexpr double kServeTimeoutS = 3600, kLoadTimeoutS = 600;

// A store's tensor: a parameter's values (state "") or its optimizer state `state`. Its name in
// messages is the state and the parameter's name, '\0' between them. Messages carry whole
// tensors: a spatial group's divided parameter (`shard`) travels as the `whole` its group's first
// rank gathered, and is cut into each rank's part on arrival.
struct NamedTensor {
  std::byte* data = nullptr;
  size_t bytes = 0;
  const ParamShard* shard = nullptr;
  const std::byte* whole = nullptr;  // a divided parameter's gathered whole, or null
  size_t whole_bytes = 0;
  size_t file_bytes() const { return shard ? whole_bytes : bytes; }
  const std::byte* file_data() const {
    CREST_CHECK(!shard || whole, "pipeline state: a divided parameter not gathered whole");
    return shard ? whole : data;
  }
};

std::string message_name(const std::string& state, const std::string& param) {
  return state + '\0' + param;
}

std::string param_of(const std::string& name) { return name.substr(name.find('\0') + 1); }

// A stage's parameters and optimizer state as host bytes: the buffers themselves on a host
// backend; on a device, copies taken at construction (`fetch`) and written back by commit().
class StateOnHost {
 public:
  StateOnHost(const ParamStore& params, Optimizer& optimizer, bool fetch)
      : values_(params.memory(), params.values(), params.bytes(), fetch) {
    for (const auto& [name, buffer] : optimizer.state())
      states_.emplace_back(name,
                           HostStaging(params.memory(), buffer->data(), buffer->bytes(), fetch));
  }
  void* values() const { return values_.data(); }
  const std::vector<std::pair<std::string, HostStaging>>& states() const { return states_; }
  void commit() {
    values_.commit();
    for (auto& [name, host] : states_) host.commit();
  }

 private:
  HostStaging values_;
  std::vector<std::pair<std::string, HostStaging>> states_;
};

// A stage's tensors by message name, in `host`'s bytes.
std::map<std::string, NamedTensor> named_tensors(const ParamStore& params, const StateOnHost& host,
                                                 const WholeParts* wholes = nullptr) {
  CREST_CHECK(params.memory().is_host() || !params.divided(),
              "pipeline state: parameters divided over a spatial group on a device");
  const size_t element = dtype_size(params.dtype());
  std::map<std::string, NamedTensor> out;
  auto add = [&](const std::string& state, void* base, size_t s) {
    const ParamSlot& slot = params.slots()[s];
    NamedTensor t{static_cast<std::byte*>(base) + slot.offset, slot.count * element};
    if (slot.spec.shard) {
      t.shard = slot.spec.shard.get();
      t.whole = wholes ? wholes->find(s, state) : nullptr;
      t.whole_bytes = static_cast<size_t>(file_shape(slot).numel()) * element;
    }
    out[message_name(state, slot.name)] = t;
  };
  for (size_t s = 0; s < params.slots().size(); ++s) add("", host.values(), s);
  for (const auto& [state, staged] : host.states())
    for (size_t s = 0; s < params.slots().size(); ++s)
      if (params.slots()[s].spec.trainable) add(state, staged.data(), s);
  return out;
}

const NamedTensor& find_tensor(const std::map<std::string, NamedTensor>& tensors,
                               const std::string& name) {
  const auto it = tensors.find(name);
  CREST_CHECK(it != tensors.end(), "pipeline state: this stage holds no '" + param_of(name) +
                                       "' (" + name.substr(0, name.find('\0')) + ")");
  return it->second;
}

std::vector<std::byte> to_bytes(const std::string& text) {
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return {p, p + text.size()};
}

// One tensor to load: its name's length, its name, its bytes.
std::vector<std::byte> load_message(const std::string& name, const std::byte* data, size_t bytes) {
  const uint64_t length = name.size();
  const auto* length_bytes = reinterpret_cast<const std::byte*>(&length);
  std::vector<std::byte> out(length_bytes, length_bytes + sizeof length);
  const std::vector<std::byte> name_bytes = to_bytes(name);
  out.reserve(out.size() + name.size() + bytes);
  out.insert(out.end(), name_bytes.begin(), name_bytes.end());
  out.insert(out.end(), data, data + bytes);
  return out;
}

// Copies a tensor's whole bytes into its place on this rank (a divided parameter: its part).
void take_tensor(const NamedTensor& t, const std::byte* data, size_t bytes, DType dtype,
                 const std::string& name) {
  CREST_CHECK(bytes == t.file_bytes(), "pipeline state: '" + param_of(name) + "' arrived with " +
                                           std::to_string(bytes) + " bytes");
  if (t.shard)
    t.shard->take_part(data, t.data, dtype);
  else
    std::memcpy(t.data, data, bytes);
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

// A stage's first rank of replica 0 answers rank 0's requests, one tensor each, until an empty
// request ends them.
void serve(Communicator& world, const std::map<std::string, NamedTensor>& mine) {
  for (;;) {
    const std::vector<std::byte> request =
        world
            .receive(0, kRequestTag, kServeTimeoutS, "rank 0's next request for this stage's state")
            .bytes;
    if (request.empty()) return;
    const std::string name(reinterpret_cast<const char*>(request.data()), request.size());
    const NamedTensor& t = find_tensor(mine, name);
    world.send(0, kReplyTag, {t.file_data(), t.file_data() + t.file_bytes()});
  }
}

}  // namespace

const ParamStore& PipelineSavedState::layout() const { return p_.whole().executor().params(); }

std::vector<std::string> PipelineSavedState::optimizer_states() const {
  return checkpoint_file::state_names(p_.optimizer());
}

std::string PipelineSavedState::optimizer_name() const { return p_.optimizer().name(); }
uint64_t PipelineSavedState::executor_steps() const { return p_.executor().training_steps(); }
int64_t PipelineSavedState::optimizer_steps() const { return p_.optimizer().steps_taken(); }

// Replica 0's stages serve, each from its group's first rank (which holds the divided
// parameters' wholes); rank 0, stage 0's first, writes.
void PipelineSavedState::provide(
    bool with_optimizer, const std::function<void(const checkpoint_file::StateBytes&)>& write) {
  const ParamStore& params = p_.executor().params();
  Optimizer* optimizer = with_optimizer ? &p_.optimizer() : nullptr;
  const WholeParts wholes = params.divided() ? WholeParts(params, optimizer) : WholeParts();
  const StateOnHost host(params, p_.optimizer(), /*fetch=*/true);
  const auto mine = named_tensors(params, host, &wholes);
  const PipelineRanks& r = p_.ranks();
  if (world_.rank() != 0) {
    if (r.replica == 0 && r.place == 0) serve(world_, mine);
    return;
  }
  const ParamOwners owners(p_.graphs());
  std::vector<std::byte> received;  // the last tensor from another stage
  auto bytes = [&](const checkpoint_file::StateTensor& t) -> const void* {
    const ParamSlot& slot = layout().slots()[t.slot];
    const int stage = owners.stage_of(slot.name);
    if (stage == 0) return find_tensor(mine, message_name(t.state, slot.name)).file_data();
    const int from = stage * r.group_size;
    world_.send(from, kRequestTag, to_bytes(message_name(t.state, slot.name)));
    received = world_
                   .receive(from, kReplyTag, kLoadTimeoutS,
                            "stage " + std::to_string(stage) + "'s '" + slot.name + "' for rank 0")
                   .bytes;
    CREST_CHECK(received.size() ==
                    static_cast<size_t>(file_shape(slot).numel()) * dtype_size(layout().dtype()),
                "pipeline state: stage " + std::to_string(stage) + " sent '" + slot.name +
                    "' with another size");
    return received.data();
  };
  try {
    write(bytes);
  } catch (...) {
    release_servers();
    throw;
  }
  release_servers();
}

// An empty request ends each stage's serving.
void PipelineSavedState::release_servers() {
  for (int s = 1; s < p_.ranks().stages; ++s)
    world_.send(s * p_.ranks().group_size, kRequestTag, {});
}

// Rank 0 sends every other rank its stage's tensors, one message each and an empty one after
// them, from the verified file; each rank takes them by name.
void PipelineSavedState::load(const SafetensorsFile* file) {
  Executor& ex = p_.executor();
  // Fetched too: padding and the tensors of no state the file names stay as they are.
  StateOnHost host(ex.params(), p_.optimizer(), /*fetch=*/true);
  const auto mine = named_tensors(ex.params(), host);
  const DType dtype = ex.params().dtype();
  if (world_.rank() != 0) {
    size_t taken = 0;
    for (;;) {
      const std::vector<std::byte> m =
          world_.receive(0, kLoadTag, kLoadTimeoutS, "this stage's state from the checkpoint")
              .bytes;
      if (m.empty()) break;
      uint64_t length = 0;
      CREST_CHECK(m.size() >= sizeof length, "a pipeline state message ends early");
      std::memcpy(&length, m.data(), sizeof length);
      CREST_CHECK(m.size() >= sizeof length + length, "a pipeline state message ends early");
      const std::string name(reinterpret_cast<const char*>(m.data()) + sizeof length, length);
      const size_t at = sizeof length + length;
      take_tensor(find_tensor(mine, name), m.data() + at, m.size() - at, dtype, name);
      ++taken;
    }
    CREST_CHECK(taken == mine.size(), "pipeline state: this stage took " + std::to_string(taken) +
                                          " of its " + std::to_string(mine.size()) + " tensors");
    host.commit();
    return;
  }
  CREST_CHECK(file != nullptr, "pipeline state: rank 0 has no checkpoint to send");
  const auto entries = checkpoint_file::state_layout(layout(), optimizer_states());
  const ParamOwners owners(p_.graphs());
  const PipelineRanks& r = p_.ranks();
  for (int to = 0; to < world_.size(); ++to) {
    const int stage = (to / r.group_size) % r.stages;
    for (const checkpoint_file::StateEntry& e : entries) {
      const std::string& param = layout().slots()[e.tensor.slot].name;
      if (owners.stage_of(param) != stage) continue;
      const SafetensorsTensor& t = file->at(e.entry.name);
      const std::string name = message_name(e.tensor.state, param);
      if (to == 0)
        take_tensor(find_tensor(mine, name), t.data, t.bytes, dtype, name);
      else
        world_.send(to, kLoadTag, load_message(name, t.data, t.bytes));
    }
    if (to != 0) world_.send(to, kLoadTag, {});
  }
  host.commit();
}

}  // namespace crest
