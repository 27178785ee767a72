// Numbers for people: byte sizes, durations and thousands separators in summaries and logs.
#pragma once
#include <cstdint>
#include <string>

namespace crest {

std::string human_bytes(double bytes);       // "38.5 MiB", "1.7 GiB"
std::string with_thousands(int64_t n);       // "8,907,556"
std::string human_duration(double seconds);  // "42 s", "3 min 20 s", "2 h 05 min"

}  // namespace crest
