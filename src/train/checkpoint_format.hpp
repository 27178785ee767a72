// The checkpoint file format (crest/train/checkpoint.hpp has the layout) as both sides need it:
// the content checksum the writer stores and the reader verifies, and reading a file back into
// a CheckpointInfo. Private to src/train.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "crest/data/safetensors.hpp"
#include "crest/train/checkpoint.hpp"

namespace crest::checkpoint_format {

inline constexpr const char* kFormat = "crest checkpoint 1";

// Tensor name -> its bytes, for the checksum.
using TensorBytes = std::vector<std::pair<std::string, std::pair<const void*, size_t>>>;

// CRC32C over the metadata (but the checksum itself) and every tensor's bytes, in name order.
uint32_t content_crc(const std::map<std::string, std::string>& metadata, TensorBytes tensors);
std::string crc_text(uint32_t crc);  // "crc32c:0123abcd", as stored in the metadata

// Throws crest::Error (input) "<path>: <what>".
[[noreturn]] void defect(const std::string& path, const std::string& what);

// Opens `path` as a crest checkpoint: a valid safetensors file of our format whose checksum
// matches. Everything else about it is checked by the callers.
SafetensorsFile open_verified(const std::string& path);

// The metadata's fields (position, history, run shape), each checked to parse.
CheckpointInfo info_of(const SafetensorsFile& file);

}  // namespace crest::checkpoint_format
