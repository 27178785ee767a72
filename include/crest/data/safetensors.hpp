// safetensors: the checkpoint and weight-exchange format of the Hugging Face ecosystem.
//
// Layout: an 8-byte little-endian u64 N, N bytes of JSON header, then the byte buffer.
// The header maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// relative to the buffer start) plus an optional "__metadata__" object of string -> string.
//
// The reader trusts nothing in the file: every length, offset, shape and dtype is checked before
// a byte of tensor data is exposed, and every error is a crest::Error (input) that names the file
// and the defect. The writer is atomic: the target path either keeps its old contents or holds
// the complete new file, never a partial one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crest/core/dtype.hpp"
#include "crest/core/shape.hpp"

namespace crest {

// Every element type of the format. It is wider than crest::DType (I8, BOOL, unsigned types)
// because a reader must describe any valid file, even tensors crest cannot compute with.
enum class SafetensorsDType : uint8_t {
  F64,
  F32,
  F16,
  BF16,
  I64,
  I32,
  I16,
  I8,
  U64,
  U32,
  U16,
  U8,
  BOOL
};

size_t safetensors_dtype_size(SafetensorsDType t);
const char* safetensors_dtype_name(SafetensorsDType t);  // "F32", ...
// The crest dtype with the same bits, if there is one (I8, BOOL and U16..U64 have none).
std::optional<DType> to_crest_dtype(SafetensorsDType t);
SafetensorsDType to_safetensors_dtype(DType t);

// One tensor of an opened file. `data` points into the file mapping and lives as long as the
// SafetensorsFile. It is aligned to the element size when the writer followed the usual
// convention (the Python package and crest's writer both do), but callers that need alignment
// must not assume it for files from elsewhere: copy with SafetensorsFile::read_into.
struct SafetensorsTensor {
  std::string name;
  SafetensorsDType dtype = SafetensorsDType::F32;
  std::vector<int64_t> shape;  // may exceed crest::Shape's rank limit; empty = scalar
  const std::byte* data = nullptr;
  size_t bytes = 0;
  size_t offset = 0;  // begin offset within the buffer

  int64_t numel() const;
  // crest::Shape of the tensor; throws crest::Error (input) when the rank exceeds 8.
  Shape crest_shape() const;
};

// A validated, read-only view of a safetensors file (memory-mapped). Move-only. The file must not
// be truncated in place while open (a mapped read past the end is SIGBUS); write_safetensors
// replaces files by rename, which leaves existing mappings on the old contents.
class SafetensorsFile {
 public:
  // Opens and validates `path`; throws crest::Error (input) naming the file on any defect.
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&& o) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& o) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // Tensors in buffer order (which is how the file lays them out).
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  const SafetensorsTensor* find(const std::string& name) const;  // nullptr when absent
  // Throws crest::Error (input) naming the file and the tensor when absent.
  const SafetensorsTensor& at(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Copies tensor `name` into `dst` after checking that its dtype and shape are exactly the
  // expected ones (the error names file, tensor, found and expected). For checkpoint loading.
  void read_into(const std::string& name, DType dtype, const Shape& shape, void* dst) const;

 private:
  void release();

  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t> index_;  // name -> position in tensors_
  std::map<std::string, std::string> metadata_;
};

// One tensor to write: `data` holds shape.numel() elements of `dtype`, C order.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  const void* data = nullptr;
};

class AtomicOutputFile;

// Writes a safetensors file tensor by tensor, for tensors that are never all in memory at once
// (a pipeline's stages sending theirs to the writer in turn). The layout (every tensor's name,
// dtype and shape; `data` unused) and the metadata are fixed first; the bytes follow in order().
// Atomic as write_safetensors: nothing appears at `path` until commit(), and a writer destroyed
// before it removes its temporary file. Errors are crest::Error (input) naming `path`.
class SafetensorsWriter {
 public:
  // Checks the layout (names unique, non-empty, UTF-8) and writes the header.
  // `after_tensor(written, total)` as for write_safetensors.
  SafetensorsWriter(const std::string& path, std::vector<SafetensorsEntry> layout,
                    std::map<std::string, std::string> metadata = {},
                    std::function<void(size_t written, size_t total)> after_tensor = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // The file's order: largest elements first, then by name (indices into the layout). Every
  // tensor then starts at a multiple of its element size; it is the Python package's order too.
  const std::vector<size_t>& order() const { return order_; }
  // The next tensor of order(): its shape's element count of its dtype, from `data`.
  void write_next(const void* data);
  // Replaces metadata `key`'s value by `value` of the same length (a checksum of what was
  // written, in place of the placeholder the header was written with).
  void replace_metadata(const std::string& key, const std::string& value);
  // Every tensor written: fsync, rename over `path`.
  void commit();

 private:
  std::string header_text() const;

  std::string path_;
  std::vector<SafetensorsEntry> layout_;
  std::map<std::string, std::string> metadata_;
  std::function<void(size_t, size_t)> after_tensor_;
  std::vector<size_t> order_;
  std::unique_ptr<AtomicOutputFile> out_;
  size_t next_ = 0, written_ = 0, total_ = 0, header_bytes_ = 0;
};

// Writes `tensors` (and `metadata` as "__metadata__" when not empty) to `path` atomically: a
// temporary file in the same directory is written, fsync'ed and renamed over `path`, so an
// existing file is untouched if anything fails. Throws crest::Error (input) naming the file and
// the problem (duplicate or empty names, null data, I/O failure).
// `after_tensor(written, total)`, when set, is called after each tensor's bytes reach the
// temporary file (bytes written so far, file size): checkpoint tests use it to kill the process
// half-way through a write.
void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                       const std::map<std::string, std::string>& metadata = {},
                       const std::function<void(size_t written, size_t total)>& after_tensor = {});

}  // namespace crest
