// Encoding of the scheduler's messages (messages.hpp).
#include "messages.hpp"

#include <cstring>
#include <string>

namespace crest::search_detail {

std::vector<std::byte> to_bytes(const nlohmann::json& j) {
  const std::string text = j.dump();
  std::vector<std::byte> b(text.size());
  std::memcpy(b.data(), text.data(), text.size());
  return b;
}

nlohmann::json from_bytes(const std::vector<std::byte>& b) {
  return nlohmann::json::parse(std::string(reinterpret_cast<const char*>(b.data()), b.size()));
}

nlohmann::json work_to_json(const Work& w) {
  const char* kind = w.kind == Work::Kind::run    ? "run"
                     : w.kind == Work::Kind::wait ? "wait"
                                                  : "done";
  nlohmann::json params = nlohmann::json::array();
  for (const auto& [k, v] : w.params) params.push_back({k, v});
  return {{"kind", kind},
          {"trial", w.trial},
          {"params", params},
          {"epochs", w.epochs},
          {"resume", w.resume},
          {"copy_from", w.copy_from},
          {"copy_from_group", w.copy_from_group},
          {"copy_epoch", w.copy_epoch}};
}

Work work_from_json(const nlohmann::json& j) {
  Work w;
  const std::string kind = j.at("kind");
  w.kind = kind == "run" ? Work::Kind::run : kind == "wait" ? Work::Kind::wait : Work::Kind::done;
  w.trial = j.at("trial");
  for (const auto& p : j.at("params")) w.params.emplace_back(p.at(0), p.at(1));
  w.epochs = j.at("epochs");
  w.resume = j.at("resume");
  w.copy_from = j.at("copy_from");
  w.copy_from_group = j.at("copy_from_group");
  w.copy_epoch = j.at("copy_epoch");
  return w;
}

}  // namespace crest::search_detail
