// The one way crest replaces a file: write a temporary file beside it, then rename it over the
// target. Every writer of a whole file uses it (data formats, safetensors weights and
// checkpoints, staging, the resolved config, reports, timelines).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace crest {

// What commit() does to make the new contents survive a crash.
enum class CommitSync {
  // fsync the file before the rename (or a crash could leave the new name on an empty file),
  // then the directory after it (best effort: some file systems refuse).
  durable,
  // Rename only: other processes see the old or the new file, never a half-written one, but a
  // power cut may lose the new contents. For bulk copies whose completeness is recorded
  // elsewhere (staging: its manifest), where a wait for the disk per file would cost more.
  rename_only,
};

// Writes a file atomically: the bytes go to a temporary file created next to `path` (rename is
// only atomic within one file system), which commit() renames over `path`. Until then `path`
// keeps its old contents; destruction without commit removes the temporary file, so an
// exception or a crash never leaves a half-written file under the final name. Every error names
// `path` (not the temporary file) and is an input error (exit 2).
class AtomicOutputFile {
 public:
  explicit AtomicOutputFile(std::string path, CommitSync sync = CommitSync::durable);
  ~AtomicOutputFile();
  AtomicOutputFile(const AtomicOutputFile&) = delete;
  AtomicOutputFile& operator=(const AtomicOutputFile&) = delete;

  const std::string& path() const { return path_; }
  // The temporary file: for libraries that write by name (HDF5), or to read back before commit.
  const std::string& temp_path() const { return temp_path_; }

  void write(const void* data, size_t n);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  // Writes at `offset`, leaving what lies between writes unwritten: holes, which read as zeros
  // (a staged file's parts).
  void write_at(uint64_t offset, const void* data, size_t n);
  // Sets the file's size: bytes past the last write read as zeros.
  void resize(uint64_t bytes);
  // Closes our descriptor without committing: for libraries that write by name (HDF5), or to
  // read the temporary file back before commit.
  void close_descriptor();
  // fsync (CommitSync::durable), close, rename over path(), then fsync the directory (durable,
  // best effort).
  void commit();
  // Removes the temporary file now (the destructor does it too).
  void abandon() noexcept;

 private:
  std::string path_;
  std::string temp_path_;
  CommitSync sync_;
  int fd_ = -1;
  bool done_ = false;
};

// Replaces `path` with `bytes` through an AtomicOutputFile (durable).
void write_file_atomically(const std::string& path, std::string_view bytes);

}  // namespace crest
