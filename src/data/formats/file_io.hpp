// POSIX file plumbing shared by the readers of src/data (private to it): an owned read-only
// descriptor with exact reads. Writers use crest/core/atomic_file.hpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace crest::formats_io {

// A file opened read-only. Every error names the path.
class InputFile {
 public:
  explicit InputFile(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }

  // Reads up to n bytes at the current position; returns fewer only at end of file.
  size_t read_some(void* dst, size_t n);
  // Reads exactly n bytes at `offset` or throws naming `what` (e.g. "npy data") and the shortfall.
  void read_exact_at(uint64_t offset, void* dst, size_t n, const std::string& what) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace crest::formats_io
