#include "crest/core/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <utility>

#include "crest/core/error.hpp"

namespace crest {

AtomicOutputFile::AtomicOutputFile(std::string path, CommitSync sync)
    : path_(std::move(path)), temp_path_(path_ + ".tmp-XXXXXX"), sync_(sync) {
  fd_ = ::mkstemp(temp_path_.data());
  if (fd_ < 0) {
    const int err = errno;
    temp_path_.clear();  // nothing was created
    throw_io(path_, "cannot create a temporary file next to it", err);
  }
  // mkstemp creates 0600; crest's outputs are meant to be shared like any other file.
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

void AtomicOutputFile::write_at(uint64_t offset, const void* data, size_t n) {
  if (fd_ < 0) throw_runtime("internal error: " + path_ + ": write after close");
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_io(path_, "write failed", errno);
    }
    p += w;
    offset += static_cast<uint64_t>(w);
    n -= static_cast<size_t>(w);
  }
}

void AtomicOutputFile::resize(uint64_t bytes) {
  if (fd_ < 0) throw_runtime("internal error: " + path_ + ": resize after close");
  if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0)
    throw_io(path_, "cannot set its size", errno);
}

void AtomicOutputFile::close_descriptor() {
  if (fd_ >= 0 && ::close(std::exchange(fd_, -1)) != 0) throw_io(path_, "close failed", errno);
}

void AtomicOutputFile::commit() {
  if (done_) throw_runtime("internal error: " + path_ + ": commit after commit or abandon");
  if (sync_ == CommitSync::durable) {
    // A library that wrote by name (HDF5) left us without a descriptor: reopen to fsync.
    if (fd_ < 0) {
      fd_ = ::open(temp_path_.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd_ < 0) throw_io(path_, "cannot reopen the temporary file", errno);
    }
    // fsync before rename: otherwise a crash can leave the new name pointing at an empty file.
    if (::fsync(fd_) != 0) throw_io(path_, "fsync failed", errno);
  }
  close_descriptor();
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0)
    throw_io(path_, "cannot rename the temporary file into place", errno);
  done_ = true;
  if (sync_ != CommitSync::durable) return;
  // Make the rename itself durable. Best effort: the data is already safe under the new name as
  // far as this process can tell, and some file systems refuse fsync on directories.
  std::filesystem::path dir = std::filesystem::path(path_).parent_path();
  if (dir.empty()) dir = ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  AtomicOutputFile out(path);
  out.write(bytes);
  out.commit();
}

}  // namespace crest
