#include "crest/engine/whole_parts.hpp"

#include "crest/core/host_staging.hpp"
#include "crest/graph/param_shard.hpp"
#include "crest/optim/optimizer.hpp"

namespace crest {

Shape file_shape(const ParamSlot& slot) {
  return slot.spec.shard ? slot.spec.shard->whole_shape() : slot.shape;
}

WholeParts::WholeParts(const ParamStore& params, Optimizer* optimizer) {
  std::vector<std::pair<std::string, const Buffer*>> buffers = {{"", nullptr}};
  if (optimizer)
    for (const auto& [name, buffer] : optimizer->state()) buffers.emplace_back(name, buffer);
  const size_t element = dtype_size(params.dtype());
  for (size_t s = 0; s < params.slots().size(); ++s) {
    const ParamSlot& slot = params.slots()[s];
    if (!slot.spec.shard) continue;
    for (const auto& [name, buffer] : buffers) {
      if (buffer && !slot.spec.trainable) continue;  // optimizers keep state for trainables only
      const void* base = buffer ? buffer->data() : params.values();
      const HostStaging part(params.memory(), static_cast<const char*>(base) + slot.offset,
                             slot.count * element);
      std::vector<std::byte> whole = slot.spec.shard->gather(part.data(), params.dtype());
      if (!whole.empty()) wholes_.emplace(std::make_pair(s, name), std::move(whole));
    }
  }
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
      slot.spec.shard->scatter(wholes.find(s, name), part.data(), params.dtype());
      part.commit();
    }
  }
}

}  // namespace crest
