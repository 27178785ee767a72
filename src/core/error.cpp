#include "crest/core/error.hpp"

#include <cerrno>
#include <cstring>

namespace crest {
namespace {

// strerror_r comes in two flavours: the GNU one returns the text (which may or may not be in
// `buf`), the XSI one fills `buf` and returns 0. Overloads pick whichever this libc declares.
[[maybe_unused]] const char* strerror_result(const char* gnu, const char*) { return gnu; }
[[maybe_unused]] const char* strerror_result(int xsi, const char* buf) {
  return xsi == 0 ? buf : nullptr;
}

}  // namespace

std::string errno_text(int err) {
  char buf[256] = {};
  const char* text = strerror_result(::strerror_r(err, buf, sizeof buf), buf);
  std::string out = text && *text ? text : "error " + std::to_string(err);
  // ENOSPC's "No space left on device" does not say which device: the one being written to.
  // (EDQUOT needs no hint: its text, "Disk quota exceeded", says it already.)
  if (err == ENOSPC) out += " (the disk is full)";
  return out;
}

void throw_io(const std::string& path, const std::string& what, int err) {
  throw_input(path + ": " + what + ": " + errno_text(err));
}

}  // namespace crest
