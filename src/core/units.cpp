#include "crest/core/units.hpp"

#include <iomanip>
#include <sstream>

namespace crest {

std::string human_bytes(double b) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1);
  if (b >= double(1 << 30)) os << b / double(1 << 30) << " GiB";
  else if (b >= double(1 << 20)) os << b / double(1 << 20) << " MiB";
  else os << b / 1024 << " KiB";
  return os.str();
}

std::string with_thousands(int64_t n) {
  const std::string s = std::to_string(n);
  std::string out;
  const size_t first = s[0] == '-' ? 1 : 0;
  for (size_t i = 0; i < s.size(); ++i) {
    out += s[i];
    const size_t left = s.size() - 1 - i;
    if (i >= first && left > 0 && left % 3 == 0) out += ',';
  }
  return out;
}

}  // namespace crest
