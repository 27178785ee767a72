// What every file of crest that calls libhdf5 shares (src/data/formats: hdf5.cpp, the DeepCAM
// sample and stats files; prediction_file.cpp, crest predict's output): the process-wide lock,
// identifiers closed by scope, HDF5's own reason for a failure, and file access properties.
#pragma once
#include <hdf5.h>

#include <mutex>
#include <string>
#include <utility>

#include "crest/data/formats/hdf5.hpp"

namespace crest::hdf5_support {

// throw_input(path + ": " + what).
[[noreturn]] void fail(const std::string& path, const std::string& what);

// HDF5 reports failures on a per-thread error stack. The innermost entry is the specific cause
// ("truncated file: eof = ...", "can't open object"), the outermost says which API call failed.
// Clears the stack.
std::string hdf5_reason();

// Holds the process-wide HDF5 lock and silences automatic error printing, which HDF5 keeps per
// thread (so it is set on every entry, cheaply, rather than once).
class Hdf5Session {
 public:
  Hdf5Session() : lock_(hdf5_mutex()) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    H5Eclear2(H5E_DEFAULT);
  }

 private:
  std::lock_guard<std::mutex> lock_;
};

// An HDF5 identifier closed by the matching H5?close when it goes out of scope.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)), closer_(o.closer_) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
      closer_ = o.closer_;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now and reports failure (closing a file flushes it: errors matter for writers).
  herr_t close() {
    const herr_t rc = id_ >= 0 && closer_ ? closer_(id_) : 0;
    id_ = H5I_INVALID_HID;
    return rc;
  }
  void reset() { (void)close(); }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

// File access properties: keep HDF5's file locking, but do not fail on file systems that do not
// support it (Lustre and GPFS mounts often do not; h5py users work around that with
// HDF5_USE_FILE_LOCKING=FALSE, which still takes precedence).
Handle file_access_properties(const std::string& path);

}  // namespace crest::hdf5_support
