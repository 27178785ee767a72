#include "crest/train/mllog.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <utility>

#include "crest/core/error.hpp"

namespace crest {
namespace {

void append_u_escape(std::string& out, unsigned unit) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\u%04x", unit);
  out += buf;
}

// Decodes one UTF-8 sequence at s[i]; returns the code point and advances i. Overlong forms,
// surrogates, values above U+10FFFF and truncated sequences are invalid: U+FFFD, one byte on.
char32_t next_code_point(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  int len = b0 < 0x80             ? 1
            : (b0 & 0xe0) == 0xc0 ? 2
            : (b0 & 0xf0) == 0xe0 ? 3
            : (b0 & 0xf8) == 0xf0 ? 4
                                  : 0;
  if (len == 1) {
    ++i;
    return b0;
  }
  if (len == 0 || i + static_cast<size_t>(len) > s.size()) {
    ++i;
    return 0xfffd;
  }
  char32_t cp = b0 & (0x7f >> len);
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
    if ((b & 0xc0) != 0x80) {
      ++i;
      return 0xfffd;
    }
    cp = (cp << 6) | (b & 0x3f);
  }
  static constexpr char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
    ++i;
    return 0xfffd;
  }
  i += static_cast<size_t>(len);
  return cp;
}

// Python's json.dumps(s) with ensure_ascii=True (its default, and what mllog uses).
void append_string(std::string& out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const char32_t cp = next_code_point(s, i);
    switch (cp) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (cp < 0x20 || cp > 0x7e) {
          if (cp == 0x7f) {
            out += '\x7f';  // Python leaves DEL as it is: it is ASCII, and JSON allows it raw
          } else if (cp >= 0x10000) {
            const char32_t v = cp - 0x10000;
            append_u_escape(out, 0xd800 + static_cast<unsigned>(v >> 10));
            append_u_escape(out, 0xdc00 + static_cast<unsigned>(v & 0x3ff));
          } else {
            append_u_escape(out, static_cast<unsigned>(cp));
          }
        } else {
          out += static_cast<char>(cp);
        }
    }
  }
  out += '"';
}

// Python's repr(float), which json.dumps uses: the shortest digits that read back to the same
// double, in fixed notation for decimal exponents -4..15 (always with a '.': "3.0", "0.0001",
// "1000000000000000.0") and in scientific notation otherwise, with a signed exponent of at least
// two digits ("1e-05", "1.5e+16"). std::to_chars gives the same shortest digits.
void append_double(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";  // see mllog.hpp: bare NaN/Infinity would make the line invalid JSON
    return;
  }
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string_view text(buf, static_cast<size_t>(end - buf));  // "-1.2345e-05", "0e+00"
  if (text.front() == '-') {
    out += '-';
    text.remove_prefix(1);
  }
  const size_t e = text.find('e');
  std::string digits;
  for (char c : text.substr(0, e))
    if (c != '.') digits += c;
  int exp = 0;
  const std::string_view exp_text = text.substr(e + 1);
  std::from_chars(exp_text.data() + (exp_text.front() == '+' ? 1 : 0),
                  exp_text.data() + exp_text.size(), exp);
  const size_t n = digits.size();
  if (exp < -4 || exp >= 16) {
    out += digits[0];
    if (n > 1) out += "." + digits.substr(1);
    out += exp < 0 ? "e-" : "e+";
    if (std::abs(exp) < 10) out += '0';
    out += std::to_string(std::abs(exp));
  } else if (exp >= 0) {
    const auto int_digits = static_cast<size_t>(exp) + 1;
    if (n <= int_digits)
      out += digits + std::string(int_digits - n, '0') + ".0";
    else
      out += digits.substr(0, int_digits) + "." + digits.substr(int_digits);
  } else {
    out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  }
}

void append_json(std::string& out, const MllogValue& v) {
  using T = MllogValue::value_t;
  switch (v.type()) {
    case T::null:
      out += "null";
      return;
    case T::boolean:
      out += v.get<bool>() ? "true" : "false";
      return;
    case T::number_integer:
      out += std::to_string(v.get<int64_t>());
      return;
    case T::number_unsigned:
      out += std::to_string(v.get<uint64_t>());
      return;
    case T::number_float:
      append_double(out, v.get<double>());
      return;
    case T::string:
      append_string(out, v.get_ref<const std::string&>());
      return;
    case T::array: {
      out += '[';
      bool first = true;
      for (const auto& e : v) {
        if (!first) out += ", ";
        first = false;
        append_json(out, e);
      }
      out += ']';
      return;
    }
    case T::object: {
      out += '{';
      bool first = true;
      for (const auto& [k, e] : v.items()) {
        if (!first) out += ", ";
        first = false;
        append_string(out, k);
        out += ": ";
        append_json(out, e);
      }
      out += '}';
      return;
    }
    case T::binary:
    case T::discarded:
      break;
  }
  throw_runtime("internal error: an MLPerf log value of JSON type '" + std::string(v.type_name()) +
                "' cannot be written");
}

void write_all(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw_io(path, "cannot write the MLPerf log", n < 0 ? errno : EIO);
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

// Moves `path` to the first free <stem>.N<ext>, never replacing a file (another run sharing the
// directory may be doing the same at the same time). Returns the new name.
std::string move_aside(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string base = (p.parent_path() / p.stem()).string(), ext = p.extension().string();
  for (int n = 1; n < 100000; ++n) {
    const std::string to = base + "." + std::to_string(n) + ext;
    if (::renameat2(AT_FDCWD, path.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return to;
    if (errno == EEXIST) continue;
    if (errno == EINVAL || errno == ENOSYS) {  // a file system without RENAME_NOREPLACE
      std::error_code ec;
      if (std::filesystem::exists(to, ec)) continue;
      if (::rename(path.c_str(), to.c_str()) == 0) return to;
    }
    if (errno == ENOENT) return "";  // someone else moved it first: nothing left to keep
    throw_io(path, "cannot move the previous run's MLPerf log aside to " + to, errno);
  }
  throw_input(path +
              ": cannot move the previous run's MLPerf log aside: 99999 older logs are in the way");
}

}  // namespace

const char* mllog_event_type_name(MllogEventType type) {
  switch (type) {
    case MllogEventType::interval_start:
      return "INTERVAL_START";
    case MllogEventType::interval_end:
      return "INTERVAL_END";
    case MllogEventType::point_in_time:
      return "POINT_IN_TIME";
  }
  return "POINT_IN_TIME";
}

std::string mllog_json(const MllogValue& v) {
  std::string out;
  append_json(out, v);
  return out;
}

std::string mllog_source_file(std::string_view file) {
  // The last /src/, /include/ or /tests/ marks the repository's top folder (build trees and
  // checkouts add their own prefixes in front).
  size_t best = std::string_view::npos;
  for (std::string_view top : {"/src/", "/include/", "/tests/"}) {
    const size_t at = file.rfind(top);
    if (at != std::string_view::npos && (best == std::string_view::npos || at > best)) best = at;
  }
  return std::string(best == std::string_view::npos ? file : file.substr(best + 1));
}

int64_t mllog_now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::string mllog_line(int64_t time_ms, MllogEventType type, std::string_view key,
                       const MllogValue& value, const MllogValue& metadata,
                       const std::source_location& where) {
  if (!metadata.is_null() && !metadata.is_object())
    throw_runtime("internal error: MLPerf log metadata of '" + std::string(key) +
                  "' is not an object");
  MllogValue meta = MllogValue::object();
  meta["file"] = mllog_source_file(where.file_name());
  meta["lineno"] = static_cast<int64_t>(where.line());
  if (metadata.is_object())
    for (const auto& [k, v] : metadata.items()) {
      if (meta.contains(k))
        throw_runtime("internal error: MLPerf log metadata of '" + std::string(key) +
                      "' repeats '" + k + "'");
      meta[k] = v;
    }
  // The order of mllog.py's _encode_log.
  MllogValue line = MllogValue::object();
  line["namespace"] = "";
  line["time_ms"] = time_ms;
  line["event_type"] = mllog_event_type_name(type);
  line["key"] = std::string(key);
  line["value"] = value;
  line["metadata"] = std::move(meta);
  return ":::MLLOG " + mllog_json(line);
}

MllogWriter::MllogWriter(std::string path, Options options)
    : path_(std::move(path)), echo_(options.echo) {
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec)
      throw_input(parent.string() +
                  ": cannot create the directory of the MLPerf log: " + ec.message());
  }
  int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC;
  if (!options.append) flags |= O_EXCL;  // a fresh log: never write into an existing file
  for (int attempt = 0; attempt < 10 && fd_ < 0; ++attempt) {
    fd_ = ::open(path_.c_str(), flags, 0644);
    if (fd_ >= 0 || errno != EEXIST) break;
    const std::string moved = move_aside(path_);
    if (!moved.empty()) moved_to_ = moved;
  }
  if (fd_ < 0) throw_io(path_, "cannot create the MLPerf log", errno);
}

MllogWriter::~MllogWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void MllogWriter::start(std::string_view key, const MllogValue& value, const MllogValue& metadata,
                        std::source_location where) {
  log(MllogEventType::interval_start, key, value, metadata, where, mllog_now_ms());
}

void MllogWriter::end(std::string_view key, const MllogValue& value, const MllogValue& metadata,
                      std::source_location where) {
  log(MllogEventType::interval_end, key, value, metadata, where, mllog_now_ms());
}

void MllogWriter::event(std::string_view key, const MllogValue& value, const MllogValue& metadata,
                        std::source_location where) {
  log(MllogEventType::point_in_time, key, value, metadata, where, mllog_now_ms());
}

void MllogWriter::log(MllogEventType type, std::string_view key, const MllogValue& value,
                      const MllogValue& metadata, const std::source_location& where,
                      int64_t time_ms) {
  if (failed_)
    throw_input(path_ +
                ": an earlier write to this MLPerf log failed; no more lines are written to it");
  const std::string line = mllog_line(time_ms, type, key, value, metadata, where) + "\n";
  try {
    // One write() per line: with O_APPEND the line lands whole at the end of the file.
    write_all(fd_, line, path_);
  } catch (...) {
    failed_ = true;
    throw;
  }
  if (echo_) *echo_ << line << std::flush;
}

}  // namespace crest
