#include "formats/file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "crest/core/error.hpp"

namespace crest::formats_io {

InputFile::InputFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw_io(path, "cannot open", errno);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    throw_io(path, "cannot stat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw_input(path + ": not a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
  // Records are read front to back once: let the kernel read ahead aggressively.
  (void)::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

size_t InputFile::read_some(void* dst, size_t n) {
  auto* p = static_cast<char*>(dst);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::read(fd_, p + done, n - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_io(path_, "read failed", errno);
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return done;
}

void InputFile::read_exact_at(uint64_t offset, void* dst, size_t n, const std::string& what) const {
  auto* p = static_cast<char*>(dst);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_io(path_, "read failed", errno);
    }
    if (r == 0)
      throw_input(path_ + ": truncated: " + what + " needs " + std::to_string(n) +
                  " bytes at offset " + std::to_string(offset) + ", the file ends after " +
                  std::to_string(done));
    done += static_cast<size_t>(r);
  }
}

}  // namespace crest::formats_io
