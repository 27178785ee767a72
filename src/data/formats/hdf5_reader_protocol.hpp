// The messages between crest and its HDF5 reader process (docs/security.md, "libhdf5 runs in a
// reader process"). Private to src/data/formats.
//
// A message is a 4-byte little-endian length and that many bytes of fields: u8, i64, string
// (u32 length and bytes), float array (u32 count and floats). A request starts with its Op and
// the file's path; a reply with a Status, then the result or (ErrorKind, message) of the
// crest::Error the in-process reader threw, so the caller throws the same error with the same
// text. read_sample passes the shared-memory file the sample is written into along with the
// request (SCM_RIGHTS), so the sample's bytes never go through the socket; read_data_block does
// the same with one window of the sample's data (a spatial split's block).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace crest::hdf5_reader {

enum class Op : uint8_t {
  probe = 1,
  read_sample = 2,
  read_stats = 3,
  describe = 4,
  read_data_block = 5,
  data_offset = 6
};
enum class Status : uint8_t { ok = 0, error = 1 };

// The reader's first message, once it is ready: crest knows then that the executable it started
// is a reader of this protocol.
inline constexpr const char* kHello = "crest-hdf5-reader 1";

// Bounds a message (and so what a confused peer can make the other side allocate): a describe
// listing or a statistics file is far smaller.
constexpr uint32_t kMaxMessageBytes = 64u << 20;

class MessageWriter {
 public:
  explicit MessageWriter(std::string start = {}) : bytes_(std::move(start)) {}
  MessageWriter& u8(uint8_t v);
  MessageWriter& i64(int64_t v);
  MessageWriter& str(const std::string& s);
  MessageWriter& floats(const std::vector<float>& v);
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// Reads the fields of a received message in order; a field beyond its end or a length beyond
// the message is a protocol error (std::runtime_error: the peer is broken, not the user's file).
class MessageReader {
 public:
  explicit MessageReader(std::string bytes) : bytes_(std::move(bytes)) {}
  uint8_t u8();
  int64_t i64();
  std::string str();
  std::vector<float> floats();

 private:
  void take(void* dst, size_t n);
  std::string bytes_;
  size_t at_ = 0;
};

// Sends one message, with `fd` attached when it is >= 0. Returns false when the peer is gone
// (EPIPE, ECONNRESET); never raises SIGPIPE.
bool send_message(int socket, const std::string& payload, int fd = -1);

// Receives one message into `payload`, and the descriptor sent with it into `*fd` (-1 when none;
// ignored descriptors are closed). Returns false at end of stream or when the peer is gone;
// throws std::runtime_error for a message longer than kMaxMessageBytes.
bool receive_message(int socket, std::string& payload, int* fd = nullptr);

}  // namespace crest::hdf5_reader
