// The size of a file a family wrote or checked, for the tools' byte counts; 0 when it cannot be
// read (the count is a report, never a check). Private to src/data/families.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

namespace crest {

inline int64_t file_bytes(const std::string& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(n);
}

}  // namespace crest
