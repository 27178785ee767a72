// The fuzz input as a file, for readers that take a path (npy, safetensors, HDF5, checkpoints):
// one file per process, rewritten for every input, in /dev/shm where there is one (no disk I/O)
// and removed at exit. A memfd would do for crest's own readers, but libhdf5 resolves the real
// path of what it opens, which "/proc/self/fd/N" of a memfd does not have.
#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace crest::fuzz {

class InputFile {
 public:
  InputFile() {
    std::error_code ec;
    const std::filesystem::path dir = std::filesystem::is_directory("/dev/shm", ec)
                                          ? std::filesystem::path("/dev/shm")
                                          : std::filesystem::temp_directory_path();
    std::string pattern = (dir / "crest-fuzz-XXXXXX").string();
    fd_ = ::mkstemp(pattern.data());
    if (fd_ < 0) std::abort();  // nothing to fuzz without it
    path_ = pattern;
  }
  ~InputFile() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Replaces the file's contents with `data`; returns its path.
  const std::string& write(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) std::abort();
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace crest::fuzz
