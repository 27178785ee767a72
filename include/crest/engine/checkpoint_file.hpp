// A model's training state on disk: one safetensors file holding
//   model/<param>                 every parameter (its slot's shape)
//   optimizer/<state>/<param>     every optimizer state buffer, sliced like the parameters
//   __metadata__                  string fields: "format", a CRC32C over all of it ("checksum",
//                                 tensors and metadata), and what its writer adds
// written atomically (temp file, fsync, rename, directory fsync) as
// <dir>/ckpt-<12-digit global step>.safetensors. The engine owns the file — its tensors,
// checksum, verification and naming; a training run's checkpoint (crest/train/checkpoint.hpp)
// puts its position and history in the metadata, and inference reads only the parameters
// (crest/engine/trained_weights.hpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "crest/data/safetensors.hpp"
#include "crest/engine/whole_parts.hpp"
#include "crest/graph/param_store.hpp"
#include "crest/optim/optimizer.hpp"

namespace crest::checkpoint_file {

inline constexpr const char* kFormat = "crest checkpoint 1";
inline constexpr const char* kModelPrefix = "model/";

using Metadata = std::map<std::string, std::string>;
// Tensor name -> its bytes, for the checksum.
using TensorBytes = std::vector<std::pair<std::string, std::pair<const void*, size_t>>>;

// CRC32C over the metadata (but the checksum itself) and every tensor's bytes, in name order.
uint32_t content_crc(const Metadata& metadata, TensorBytes tensors);
std::string crc_text(uint32_t crc);  // "crc32c:0123abcd", as stored in the metadata

// Throws crest::Error (input) "<path>: <what>".
[[noreturn]] void defect(const std::string& path, const std::string& what);

// Opens `path` as a crest checkpoint: a valid safetensors file of our format whose checksum
// matches. Everything else about it is checked by the callers.
SafetensorsFile open_verified(const std::string& path);

// The file name of the checkpoint at `global_step` in `dir`.
std::string path_for_step(const std::string& dir, int64_t global_step);
// Checkpoint files in `dir`, oldest first (by the global step in their names). Temporary files
// of interrupted writes are not checkpoints and are not listed.
std::vector<std::string> list(const std::string& dir);

// Writes `params` and `optimizer`'s state with `metadata` (plus "format" and "checksum") to
// `path` atomically. `progress(written, total)`, when given, is called as the bytes go out (a
// test hook kills the process there). Throws crest::Error naming the file on any failure;
// nothing at `path` changes then. Divided parameters are written whole, from `wholes`.
void write(const std::string& path, Metadata metadata, const ParamStore& params,
           Optimizer& optimizer, const std::function<void(size_t, size_t)>& progress = {},
           const WholeParts& wholes = {});

// Verifies every tensor of the verified `file` (names, dtypes, shapes, nothing extra) against
// `params` and `optimizer` before changing anything, then loads them. Errors (input) name the
// file and the tensor. Divided parameters take their part of the whole tensor; with `wholes`, the
// whole tensors are kept there (for scatter_parts).
void load(const SafetensorsFile& file, ParamStore& params, Optimizer& optimizer,
          WholeParts* wholes = nullptr);

// Loads only the model/<param> tensors of the verified `file` (F32 or F64, converted to the
// store's dtype), after checking each against its slot; the optimizer state is ignored.
void load_parameters(const SafetensorsFile& file, ParamStore& params);

}  // namespace crest::checkpoint_file
