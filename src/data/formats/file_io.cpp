#include "data/formats/file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <utility>

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

AtomicOutputFile::AtomicOutputFile(std::string path)
    : path_(std::move(path)), temp_path_(path_ + ".tmp-XXXXXX") {
  fd_ = ::mkstemp(temp_path_.data());
  if (fd_ < 0) {
    const int err = errno;
    temp_path_.clear();  // nothing was created
    throw_io(path_, "cannot create a temporary file next to it", err);
  }
  // mkstemp creates 0600; data files are meant to be shared like any other output.
  if (::fchmod(fd_, 0644) != 0) {
    const int err = errno;
    abandon();
    throw_io(path_, "cannot set permissions", err);
  }
}

AtomicOutputFile::~AtomicOutputFile() { abandon(); }

void AtomicOutputFile::abandon() noexcept {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  if (!done_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
  done_ = true;
}

void AtomicOutputFile::write(const void* data, size_t n) {
  if (fd_ < 0) throw_runtime("internal error: " + path_ + ": write after close");
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_io(path_, "write failed", errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void AtomicOutputFile::close_descriptor() {
  if (fd_ >= 0 && ::close(std::exchange(fd_, -1)) != 0) throw_io(path_, "close failed", errno);
}

void AtomicOutputFile::commit() {
  if (done_) throw_runtime("internal error: " + path_ + ": commit after commit or abandon");
  // A library that wrote by name (HDF5) left us without a descriptor: reopen to fsync.
  if (fd_ < 0) {
    fd_ = ::open(temp_path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw_io(path_, "cannot reopen the temporary file", errno);
  }
  // fsync before rename: otherwise a crash can leave the new name pointing at an empty file.
  if (::fsync(fd_) != 0) throw_io(path_, "fsync failed", errno);
  close_descriptor();
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0)
    throw_io(path_, "cannot rename the temporary file into place", errno);
  done_ = true;
  // Make the rename itself durable. Best effort: some file systems refuse fsync on directories.
  std::filesystem::path dir = std::filesystem::path(path_).parent_path();
  if (dir.empty()) dir = ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace crest::formats_io
