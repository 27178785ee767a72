#include "formats/hdf5_reader_protocol.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace crest::hdf5_reader {
namespace {

void append_raw(std::string& out, const void* p, size_t n) {
  out.append(static_cast<const char*>(p), n);
}

std::string length_prefix(uint32_t n) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
  return out;
}

// Reads exactly n bytes; false at end of stream or error. The first read may carry a descriptor.
bool read_exact(int socket, char* dst, size_t n, int* fd) {
  size_t done = 0;
  while (done < n) {
    iovec iov{dst + done, n - done};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t got = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      int received = -1;
      std::memcpy(&received, CMSG_DATA(c), sizeof received);
      if (fd && *fd < 0)
        *fd = received;
      else
        ::close(received);
    }
    done += static_cast<size_t>(got);
  }
  return true;
}

}  // namespace

MessageWriter& MessageWriter::u8(uint8_t v) {
  append_raw(bytes_, &v, 1);
  return *this;
}

MessageWriter& MessageWriter::i64(int64_t v) {
  append_raw(bytes_, &v, sizeof v);
  return *this;
}

MessageWriter& MessageWriter::str(const std::string& s) {
  const auto n = static_cast<uint32_t>(s.size());
  append_raw(bytes_, &n, sizeof n);
  bytes_ += s;
  return *this;
}

MessageWriter& MessageWriter::floats(const std::vector<float>& v) {
  const auto n = static_cast<uint32_t>(v.size());
  append_raw(bytes_, &n, sizeof n);
  append_raw(bytes_, v.data(), v.size() * sizeof(float));
  return *this;
}

void MessageReader::take(void* dst, size_t n) {
  if (n > bytes_.size() - at_) throw std::runtime_error("HDF5 reader message ends early");
  std::memcpy(dst, bytes_.data() + at_, n);
  at_ += n;
}

uint8_t MessageReader::u8() {
  uint8_t v = 0;
  take(&v, 1);
  return v;
}

int64_t MessageReader::i64() {
  int64_t v = 0;
  take(&v, sizeof v);
  return v;
}

std::string MessageReader::str() {
  uint32_t n = 0;
  take(&n, sizeof n);
  std::string s(std::min<size_t>(n, bytes_.size() - at_), '\0');
  take(s.data(), n);
  return s;
}

std::vector<float> MessageReader::floats() {
  uint32_t n = 0;
  take(&n, sizeof n);
  std::vector<float> v(std::min<size_t>(n, (bytes_.size() - at_) / sizeof(float) + 1));
  if (v.size() != n) throw std::runtime_error("HDF5 reader message ends early");
  take(v.data(), v.size() * sizeof(float));
  return v;
}

bool send_message(int socket, const std::string& payload, int fd) {
  const std::string message = length_prefix(static_cast<uint32_t>(payload.size())) + payload;
  size_t done = 0;
  while (done < message.size()) {
    iovec iov{const_cast<char*>(message.data() + done), message.size() - done};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (fd >= 0 && done == 0) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    const ssize_t sent = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    done += static_cast<size_t>(sent);
  }
  return true;
}

bool receive_message(int socket, std::string& payload, int* fd) {
  if (fd) *fd = -1;
  char header[4];
  if (!read_exact(socket, header, sizeof header, fd)) {
    if (fd && *fd >= 0) ::close(std::exchange(*fd, -1));
    return false;
  }
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i)
    n |= static_cast<uint32_t>(static_cast<unsigned char>(header[i])) << (8 * i);
  if (n > kMaxMessageBytes)
    throw std::runtime_error("HDF5 reader message of " + std::to_string(n) + " bytes");
  payload.assign(n, '\0');
  if (read_exact(socket, payload.data(), n, fd)) return true;
  if (fd && *fd >= 0) ::close(std::exchange(*fd, -1));
  return false;
}

}  // namespace crest::hdf5_reader
