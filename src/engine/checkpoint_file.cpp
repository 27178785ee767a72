// The checkpoint file's own side: checksum, verification and names. Kept apart from writing
// and loading tensors (checkpoint_state.cpp), which need a model and an optimizer, so that
// `crest inspect` and the fuzz harness (tests/fuzz) link only this and the safetensors reader.
#include "crest/engine/checkpoint_file.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "crest/core/error.hpp"
#include "crest/data/formats/crc32c.hpp"

namespace crest::checkpoint_file {
namespace fs = std::filesystem;

namespace {

constexpr const char* kPrefix = "ckpt-";
constexpr const char* kSuffix = ".safetensors";

// The global step in a checkpoint's file name, or -1 when it is not one.
int64_t step_of(const fs::path& p) {
  const std::string name = p.filename().string();
  const std::string pre = kPrefix, suf = kSuffix;
  if (name.size() <= pre.size() + suf.size() || name.compare(0, pre.size(), pre) != 0 ||
      name.compare(name.size() - suf.size(), suf.size(), suf) != 0)
    return -1;
  const std::string digits = name.substr(pre.size(), name.size() - pre.size() - suf.size());
  if (digits.empty() || digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), ::isdigit))
    return -1;
  return std::stoll(digits);
}

}  // namespace

uint32_t metadata_crc(const Metadata& metadata) {
  uint32_t crc = 0;
  for (const auto& [k, v] : metadata) {
    if (k == "checksum") continue;
    crc = crc32c(k.data(), k.size(), crc);
    crc = crc32c("=", 1, crc);
    crc = crc32c(v.data(), v.size(), crc);
    crc = crc32c("\n", 1, crc);
  }
  return crc;
}

uint32_t tensor_crc(uint32_t crc, const std::string& name, const void* data, size_t bytes) {
  crc = crc32c(name.data(), name.size(), crc);
  return crc32c(data, bytes, crc);
}

uint32_t content_crc(const Metadata& metadata, TensorBytes tensors) {
  std::sort(tensors.begin(), tensors.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  uint32_t crc = metadata_crc(metadata);
  for (const auto& [name, data] : tensors) crc = tensor_crc(crc, name, data.first, data.second);
  return crc;
}

std::string crc_text(uint32_t crc) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "crc32c:%08x", crc);
  return buf;
}

void defect(const std::string& path, const std::string& what) { throw_input(path + ": " + what); }

SafetensorsFile open_verified(const std::string& path) {
  if (!fs::exists(path)) defect(path, "no such checkpoint file");
  SafetensorsFile file = [&] {
    try {
      return SafetensorsFile(path);
    } catch (const Error& e) {
      // The safetensors reader names the file and the structural defect (truncated, bad header).
      throw Error(e.kind(), std::string(e.what()) + " (not a readable crest checkpoint)");
    }
  }();
  const auto& md = file.metadata();
  const auto format = md.find("format");
  if (format == md.end() || format->second != kFormat)
    defect(path, "not a crest checkpoint (metadata 'format' is " +
                     (format == md.end() ? std::string("missing") : "'" + format->second + "'") +
                     ", expected '" + kFormat + "')");
  const auto sum = md.find("checksum");
  if (sum == md.end()) defect(path, "checkpoint has no checksum");
  TensorBytes tensors;
  for (const auto& t : file.tensors()) tensors.push_back({t.name, {t.data, t.bytes}});
  const std::string actual = crc_text(content_crc(md, tensors));
  if (actual != sum->second)
    defect(path, "checkpoint is corrupt: content checksum is " + actual + ", the file says " +
                     sum->second);
  return file;
}

std::string path_for_step(const std::string& dir, int64_t global_step) {
  char name[64];
  std::snprintf(name, sizeof name, "%s%012lld%s", kPrefix, static_cast<long long>(global_step),
                kSuffix);
  return (fs::path(dir) / name).string();
}

std::vector<std::string> list(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const int64_t step = step_of(entry.path());
    if (step >= 0 && entry.is_regular_file(ec)) found.emplace_back(step, entry.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  out.reserve(found.size());
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

}  // namespace crest::checkpoint_file
