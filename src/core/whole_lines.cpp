#include "crest/core/whole_lines.hpp"

namespace crest {

WholeLines::WholeLines(std::ostream& target) : std::ostream(nullptr), buffer_(target) {
  rdbuf(&buffer_);
}

WholeLines::~WholeLines() { buffer_.sync(); }

int WholeLines::Buffer::sync() {
  if (line_.empty()) return 0;
  target_.write(line_.data(), static_cast<std::streamsize>(line_.size()));
  target_.flush();
  line_.clear();
  return target_ ? 0 : -1;
}

int WholeLines::Buffer::overflow(int c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  const char ch = traits_type::to_char_type(c);
  line_.push_back(ch);
  if (ch == '\n' || ch == '\r') sync();
  return c;
}

std::streamsize WholeLines::Buffer::xsputn(const char* s, std::streamsize n) {
  for (std::streamsize i = 0; i < n; ++i) overflow(traits_type::to_int_type(s[i]));
  return n;
}

}  // namespace crest
