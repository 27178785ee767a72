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
// The same in parts: the metadata's, then each tensor's (name, bytes) in name order on top.
uint32_t metadata_crc(const Metadata& metadata);
uint32_t tensor_crc(uint32_t crc, const std::string& name, const void* data, size_t bytes);
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

// One tensor of a model's state: slot `slot`'s values (`state` empty) or its buffer of optimizer
// state `state`, the whole slot's shape (file_shape) in the store's dtype.
struct StateTensor {
  std::string state;
  size_t slot = 0;
};
// A state tensor's bytes, valid until the next call: asked once per tensor, in the file's order.
using StateBytes = std::function<const void*(const StateTensor&)>;

// The names of a checkpoint's tensors with what each holds: model/<param> for every slot of
// `layout`, then optimizer/<state>/<param> for every state of `states` and every trainable slot.
struct StateEntry {
  SafetensorsEntry entry;  // name, dtype, shape; data unused
  StateTensor tensor;
};
std::vector<StateEntry> state_layout(const ParamStore& layout,
                                     const std::vector<std::string>& states);
// The names of `optimizer`'s state buffers a checkpoint holds (Optimizer::state()).
std::vector<std::string> state_names(Optimizer& optimizer);

// Writes the checkpoint of a model laid out as `layout` (its buffers need not exist here) whose
// optimizer keeps `states`, with `metadata` (plus "format" and "checksum"), to `path` atomically,
// asking `bytes` for each tensor as the file takes it: the tensors need never be in memory at
// once (a pipeline's stages send theirs to the writer in turn). `progress(written, total)`, when
// given, is called as the bytes go out (a test hook kills the process there). Throws crest::Error
// naming the file on any failure; nothing at `path` changes then.
void write(const std::string& path, Metadata metadata, const ParamStore& layout,
           const std::vector<std::string>& states, const StateBytes& bytes,
           const std::function<void(size_t, size_t)>& progress = {});

// Calls `use` with the bytes of `params`' values and (with `optimizer`) its state, in host
// memory (copies where the store lives on a device); divided parameters whole from `wholes`.
void with_host_bytes(const ParamStore& params, Optimizer* optimizer, const WholeParts& wholes,
                     const std::function<void(const StateBytes&)>& use);

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

// Checks that the verified `file` holds exactly the tensors of state_layout(layout, states), each
// with its dtype and shape; errors (input) name the file and the tensor.
void check_layout(const SafetensorsFile& file, const ParamStore& layout,
                  const std::vector<std::string>& states);

// Loads only the model/<param> tensors of the verified `file` (F32 or F64, converted to the
// store's dtype), after checking each against its slot; the optimizer state is ignored.
void load_parameters(const SafetensorsFile& file, ParamStore& params);

}  // namespace crest::checkpoint_file
