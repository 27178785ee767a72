// POSIX file plumbing shared by the format readers and writers (private to src/data/formats):
// an owned read-only descriptor with exact reads, and the atomic output file every writer uses.
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

// Writes a file atomically: the bytes go to a temporary file created next to `path` (rename is
// only atomic within one file system), which commit() fsyncs and renames over `path`. Until then
// `path` keeps its old contents; destruction without commit removes the temporary file, so an
// exception or a crash never leaves a half-written file under the final name.
class AtomicOutputFile {
 public:
  explicit AtomicOutputFile(std::string path);
  ~AtomicOutputFile();
  AtomicOutputFile(const AtomicOutputFile&) = delete;
  AtomicOutputFile& operator=(const AtomicOutputFile&) = delete;

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

  void write(const void* data, size_t n);
  // Closes our descriptor without committing, for libraries that write by name (HDF5).
  void close_descriptor();
  // fsync, close, rename over path(), then fsync the directory (best effort).
  void commit();
  // Removes the temporary file now (the destructor does it too).
  void abandon() noexcept;

 private:
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  bool done_ = false;
};

}  // namespace crest::formats_io
