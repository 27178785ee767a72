#include "crest/core/units.hpp"

#include <cstdio>
#include <iomanip>
#include <sstream>

namespace crest {

std::string human_bytes(double b) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1);
  if (b >= double(1 << 30))
    os << b / double(1 << 30) << " GiB";
  else if (b >= double(1 << 20))
    os << b / double(1 << 20) << " MiB";
  else
    os << b / 1024 << " KiB";
  return os.str();
}

std::string human_duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e9) return "?";
  const auto t = static_cast<int64_t>(seconds + 0.5);
  char buf[64];
  if (t < 60)
    std::snprintf(buf, sizeof buf, "%lld s", static_cast<long long>(t));
  else if (t < 3600)
    std::snprintf(buf, sizeof buf, "%lld min %02lld s", static_cast<long long>(t / 60),
                  static_cast<long long>(t % 60));
  else
    std::snprintf(buf, sizeof buf, "%lld h %02lld min", static_cast<long long>(t / 3600),
                  static_cast<long long>(t / 60 % 60));
  return buf;
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
