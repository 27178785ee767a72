// The reader process's side (crest/data/formats/hdf5_reader.hpp): `crest __hdf5-reader` serves
// requests with the in-process readers until crest closes the socket.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <utility>

#include "crest/core/error.hpp"
#include "crest/data/formats/hdf5_in_process.hpp"
#include "crest/data/formats/hdf5_reader.hpp"
#include "formats/hdf5_reader_protocol.hpp"
#include "formats/hdf5_sample_bytes.hpp"

namespace crest {
namespace {

using hdf5_reader::MessageReader;
using hdf5_reader::MessageWriter;
using hdf5_reader::Op;
using hdf5_reader::Status;

// The shared memory crest sends with each read_sample request, kept mapped while crest keeps
// the same file (the same one for every sample of a run): mapping 56 MB afresh for every sample
// would fault its pages in again each time.
class SharedSample {
 public:
  ~SharedSample() { unmap(); }
  // Maps `fd` (closed here) for `bytes`; throws a runtime error when it is smaller.
  char* map(int fd, size_t bytes) {
    struct stat st {};
    const bool ok = ::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) >= bytes;
    if (ok && addr_ && st.st_dev == dev_ && st.st_ino == ino_ && bytes <= size_) {
      ::close(fd);
      return addr_;
    }
    unmap();
    void* p = ok ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    ::close(fd);
    if (p == MAP_FAILED) throw_runtime("HDF5 reader: cannot map the sample's shared memory");
    addr_ = static_cast<char*>(p);
    size_ = bytes;
    dev_ = st.st_dev;
    ino_ = st.st_ino;
    return addr_;
  }

 private:
  void unmap() {
    if (addr_) ::munmap(addr_, size_);
    addr_ = nullptr;
  }
  char* addr_ = nullptr;
  size_t size_ = 0;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

DeepcamSampleShape read_shape(MessageReader& in) {
  DeepcamSampleShape shape;
  shape.height = in.i64();
  shape.width = in.i64();
  shape.channels = in.i64();
  return shape;
}

// read_sample: the shape expected, which datasets to read, the shared memory (data at offset 0,
// labels after it).
void read_sample(MessageReader& in, const std::string& path, int& fd, SharedSample& shared,
                 MessageWriter& out) {
  const DeepcamSampleShape shape = read_shape(in);
  const bool want_data = in.u8() != 0, want_labels = in.u8() != 0;
  const SampleBytes bytes = sample_bytes(path, shape);
  char* base = nullptr;  // stays null for an impossible shape, which the read refuses first
  if (bytes.total > 0) {
    if (fd < 0) throw_runtime("HDF5 reader: a read_sample request without its shared memory");
    base = shared.map(std::exchange(fd, -1), bytes.total);
  }
  hdf5_in_process::read_deepcam_sample(
      path, shape, want_data ? reinterpret_cast<float*>(base) : nullptr,
      want_labels && base ? reinterpret_cast<int32_t*>(base + bytes.data) : nullptr);
  out.u8(static_cast<uint8_t>(Status::ok));
}

// read_data_block: the shape expected, the window, the shared memory (the block's floats).
void read_data_block(MessageReader& in, const std::string& path, int& fd, SharedSample& shared,
                     MessageWriter& out) {
  const DeepcamSampleShape shape = read_shape(in);
  DeepcamWindow window;
  window.h0 = in.i64();
  window.h1 = in.i64();
  window.w0 = in.i64();
  window.w1 = in.i64();
  const size_t bytes = block_bytes(path, shape, window);
  if (fd < 0) throw_runtime("HDF5 reader: a read_data_block request without its shared memory");
  char* base = shared.map(std::exchange(fd, -1), bytes);
  hdf5_in_process::read_deepcam_data_block(path, shape, window, reinterpret_cast<float*>(base));
  out.u8(static_cast<uint8_t>(Status::ok));
}

void serve(MessageReader& in, const std::string& path, Op op, int& fd, SharedSample& shared,
           MessageWriter& out) {
  switch (op) {
    case Op::probe: {
      const DeepcamSampleShape s = hdf5_in_process::probe_deepcam_sample(path);
      out.u8(static_cast<uint8_t>(Status::ok)).i64(s.height).i64(s.width).i64(s.channels);
      return;
    }
    case Op::read_sample:
      return read_sample(in, path, fd, shared, out);
    case Op::read_data_block:
      return read_data_block(in, path, fd, shared, out);
    case Op::read_stats: {
      const DeepcamStats s = hdf5_in_process::read_deepcam_stats(path);
      out.u8(static_cast<uint8_t>(Status::ok)).i64(s.count);
      out.floats(s.minval).floats(s.maxval).floats(s.mean).floats(s.sqmean);
      return;
    }
    case Op::describe:
      out.u8(static_cast<uint8_t>(Status::ok)).str(hdf5_in_process::describe_hdf5(path));
      return;
    case Op::data_offset:
      out.u8(static_cast<uint8_t>(Status::ok)).i64(hdf5_in_process::deepcam_data_offset(path));
      return;
  }
  throw_runtime("HDF5 reader: unknown request " + std::to_string(static_cast<int>(op)));
}

// One request to its reply: the result, or the error the in-process reader threw (kind and text).
std::string answer(const std::string& request, int& fd, SharedSample& shared,
                   const std::string& kill_on) {
  MessageReader in(request);
  const auto op = static_cast<Op>(in.u8());
  const std::string path = in.str();
  if (!kill_on.empty() && path.find(kill_on) != std::string::npos) ::raise(SIGKILL);
  MessageWriter out;
  try {
    serve(in, path, op, fd, shared, out);
    return out.bytes();
  } catch (const Error& e) {
    return MessageWriter()
        .u8(static_cast<uint8_t>(Status::error))
        .u8(static_cast<uint8_t>(e.kind()))
        .str(e.what())
        .bytes();
  } catch (const std::bad_alloc&) {
    return MessageWriter()
        .u8(static_cast<uint8_t>(Status::error))
        .u8(static_cast<uint8_t>(ErrorKind::runtime))
        .str(path + ": the HDF5 reader ran out of memory")
        .bytes();
  }
}

// The reader ends when its socket reaches end of stream (crest closed it, or crest ended: the
// system closes it then), not on the signals that ask crest to stop: a Ctrl-C or a scheduler's
// SIGTERM must let crest finish its step and checkpoint, which may still read a file. (Not
// PR_SET_PDEATHSIG: it fires when the crest *thread* that started the reader ends, such as a
// `crest validate` worker.)
void detach_from_stop_signals() {
  for (const int sig : {SIGINT, SIGTERM, SIGUSR1, SIGHUP, SIGQUIT}) ::signal(sig, SIG_IGN);
}

}  // namespace

int run_hdf5_reader(int socket) {
  detach_from_stop_signals();
  const char* kill_on = std::getenv("CREST_TEST_HDF5_READER_KILL");
  SharedSample shared;
  if (!hdf5_reader::send_message(socket, hdf5_reader::kHello)) return 0;
  for (;;) {
    std::string request;
    int fd = -1;
    try {
      if (!hdf5_reader::receive_message(socket, request, &fd)) return 0;
      const std::string reply = answer(request, fd, shared, kill_on ? kill_on : "");
      if (fd >= 0) ::close(fd);
      if (!hdf5_reader::send_message(socket, reply)) return 0;
    } catch (const std::exception& e) {
      // A malformed request: crest and its reader disagree, which no file can cause.
      std::fprintf(stderr, "crest __hdf5-reader: %s\n", e.what());
      return 1;
    }
  }
}

}  // namespace crest
