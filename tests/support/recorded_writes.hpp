// A stream buffer that records every write it receives, one string per write: tests of streams
// that must hand their target whole lines (WholeLines, RunLog) compare the pieces.
#pragma once
#include <streambuf>
#include <string>
#include <vector>

namespace crest::test {

class RecordedWrites : public std::streambuf {
 public:
  std::vector<std::string> seen;

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    seen.emplace_back(s, static_cast<size_t>(n));
    return n;
  }
  int overflow(int c) override {
    seen.emplace_back(1, traits_type::to_char_type(c));
    return c;
  }
};

}  // namespace crest::test
