#include "crest/engine/whole_parts.hpp"

#include <functional>

#include "crest/core/host_staging.hpp"
#include "crest/graph/param_shard.hpp"
#include "crest/optim/optimizer.hpp"

namespace crest {

Shape file_shape(const ParamSlot& slot) {
  return slot.spec.shard ? slot.spec.shard->whole_shape() : slot.shape;
}

namespace {

// Every divided slot's part in the values (state "") and, with an optimizer, in each of its
// state buffers (kept for trainable slots only), in slot order: fn(slot index, state, part
// staged on the host).
void for_each_part(const ParamStore& params, Optimizer* optimizer,
                   const std::function<void(size_t, const std::string&, HostStaging&)>& fn) {
  std::vector<std::pair<std::string, Buffer*>> buffers = {{"", nullptr}};
  if (optimizer)
    for (const auto& [name, buffer] : optimizer->state()) buffers.emplace_back(name, buffer);
  const size_t element = dtype_size(params.dtype());
  for (size_t s = 0; s < params.slots().size(); ++s) {
    const ParamSlot& slot = params.slots()[s];
    if (!slot.spec.shard) continue;
    for (const auto& [name, buffer] : buffers) {
      if (buffer && !slot.spec.trainable) continue;
      void* base = buffer ? buffer->data() : params.values();
      HostStaging part(params.memory(), static_cast<char*>(base) + slot.offset,
                       slot.count * element);
      fn(s, name, part);
    }
  }
}

}  // namespace

WholeParts::WholeParts(const ParamStore& params, Optimizer* optimizer) {
  for_each_part(params, optimizer, [&](size_t s, const std::string& state, HostStaging& part) {
    std::vector<std::byte> whole =
        params.slots()[s].spec.shard->gather(part.data(), params.dtype());
    if (!whole.empty()) wholes_.emplace(std::make_pair(s, state), std::move(whole));
  });
}

const std::byte* WholeParts::find(size_t slot, const std::string& state) const {
  const auto it = wholes_.find({slot, state});
  return it == wholes_.end() ? nullptr : it->second.data();
}

void WholeParts::add(size_t slot, const std::string& state, std::vector<std::byte> whole) {
  wholes_[{slot, state}] = std::move(whole);
}

void* PartsFromWhole::whole_for(const ParamStore& params, size_t s, const std::string& state,
                                void* part) {
  const ParamSlot& slot = params.slots()[s];
  const auto count = static_cast<size_t>(slot.spec.shard->whole_shape().numel());
  pending_.push_back({&slot, s, state, params.dtype(), part,
                      std::vector<std::byte>(count * dtype_size(params.dtype()))});
  return pending_.back().whole.data();
}

void PartsFromWhole::take(WholeParts* keep) {
  for (Pending& p : pending_) {
    p.slot->spec.shard->take_part(p.whole.data(), p.part, p.dtype);
    if (keep) keep->add(p.index, p.state, std::move(p.whole));
  }
  pending_.clear();
}

void scatter_parts(const ParamStore& params, Optimizer* optimizer, const WholeParts& wholes) {
  for_each_part(params, optimizer, [&](size_t s, const std::string& state, HostStaging& part) {
    params.slots()[s].spec.shard->scatter(wholes.find(s, state), part.data(), params.dtype());
    part.commit();
  });
}

}  // namespace crest
