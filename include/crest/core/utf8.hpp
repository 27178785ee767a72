// UTF-8 well-formedness (Unicode Table 3-7): text that JSON and YAML must hold. Configs and
// checkpoint metadata are checked with it before a byte is written, so a stray Latin-1 byte in a
// config is an error naming the file and line, not a failure at the first checkpoint.
#pragma once
#include <cstddef>
#include <string_view>

namespace crest {

// The offset of the first byte of `text` that does not start a well-formed UTF-8 sequence (no
// overlong forms, no surrogates, nothing above U+10FFFF), or std::string_view::npos.
size_t invalid_utf8_at(std::string_view text);

}  // namespace crest
