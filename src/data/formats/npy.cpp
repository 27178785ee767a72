#include "crest/data/formats/npy.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "crest/core/atomic_file.hpp"
#include "crest/core/box_copy.hpp"
#include "crest/core/error.hpp"
#include "crest/core/shape.hpp"
#include "formats/file_io.hpp"

namespace crest {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
// Our own bound on the header: numpy refuses headers above 10,000 bytes by default; structured
// dtypes can need more, which we do not read anyway. Checked before allocating.
constexpr uint64_t kMaxHeaderBytes = uint64_t{1} << 20;
constexpr size_t kAlign = 64;                // numpy's ARRAY_ALIGN
constexpr size_t kGrowthAxisMaxDigits = 21;  // numpy's GROWTH_AXIS_MAX_DIGITS

struct DTypeInfo {
  NpyDType dtype;
  char kind;  // numpy's kind character
  size_t size;
  const char* name;
};

constexpr DTypeInfo kDTypes[] = {
    {NpyDType::f16, 'f', 2, "float16"}, {NpyDType::f32, 'f', 4, "float32"},
    {NpyDType::f64, 'f', 8, "float64"}, {NpyDType::i8, 'i', 1, "int8"},
    {NpyDType::i16, 'i', 2, "int16"},   {NpyDType::i32, 'i', 4, "int32"},
    {NpyDType::i64, 'i', 8, "int64"},   {NpyDType::u8, 'u', 1, "uint8"},
    {NpyDType::u16, 'u', 2, "uint16"},  {NpyDType::u32, 'u', 4, "uint32"},
    {NpyDType::u64, 'u', 8, "uint64"},  {NpyDType::b1, 'b', 1, "bool"},
};

const DTypeInfo& info(NpyDType t) {
  for (const auto& d : kDTypes)
    if (d.dtype == t) return d;
  throw_runtime("internal error: unhandled NpyDType");
}

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw_input(path + ": " + what);
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The Python dict literal numpy writes. Only what np.save can produce is accepted: string keys,
// and string, True/False and tuple-of-int values.
class HeaderParser {
 public:
  HeaderParser(const std::string& path, const std::string& text) : path_(path), s_(text) {}

  NpyHeader parse() {
    NpyHeader h;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    for (;;) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = string_literal();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (peek() == '[') bad("structured dtypes (a list 'descr') are not supported");
        h.descr = string_literal();
        have_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
        have_order = true;
      } else if (key == "shape") {
        h.shape = tuple();
        have_shape = true;
      } else {
        bad("unexpected key '" + key + "'");
      }
      skip_space();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() != '}') bad("expected ',' or '}'");
    }
    ++i_;  // '}'
    skip_space();
    if (i_ != s_.size()) bad("unexpected text after the closing '}'");
    if (!have_descr) bad("missing key 'descr'");
    if (!have_order) bad("missing key 'fortran_order'");
    if (!have_shape) bad("missing key 'shape'");
    return h;
  }

 private:
  [[noreturn]] void bad(const std::string& what) const {
    fail(path_, "unparseable .npy header (" + what + " at character " + std::to_string(i_) +
                    "): " + excerpt());
  }
  std::string excerpt() const {
    std::string e = s_.substr(0, std::min<size_t>(s_.size(), 120));
    for (char& c : e)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    return "\"" + e + (s_.size() > 120 ? "...\"" : "\"");
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) bad(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string string_literal() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') bad("expected a quoted string");
    const size_t start = ++i_;
    while (i_ < s_.size() && s_[i_] != quote) {
      if (s_[i_] == '\\') bad("escape sequences are not supported");
      ++i_;
    }
    if (i_ == s_.size()) bad("unterminated string");
    return s_.substr(start, i_++ - start);
  }
  bool boolean() {
    if (s_.compare(i_, 4, "True") == 0) {
      i_ += 4;
      return true;
    }
    if (s_.compare(i_, 5, "False") == 0) {
      i_ += 5;
      return false;
    }
    bad("expected True or False");
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> dims;
    expect('(');
    for (;;) {
      skip_space();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') bad("expected a non-negative integer in the shape");
      uint64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        const auto digit = static_cast<uint64_t>(peek() - '0');
        if (v > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - digit) / 10)
          bad("shape entry too large");
        v = v * 10 + digit;
        ++i_;
      }
      if (peek() == 'L') ++i_;  // Python 2 long literal
      dims.push_back(static_cast<int64_t>(v));
      if (dims.size() > 64) bad("more than 64 dimensions");
      skip_space();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() != ')') bad("expected ',' or ')' in the shape");
    }
    ++i_;
    return dims;
  }

  const std::string& path_;
  const std::string& s_;
  size_t i_ = 0;
};

[[noreturn]] void unsupported_descr(const std::string& path, const std::string& descr) {
  fail(path, "unsupported dtype '" + descr +
                 "' (supported: f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1, either byte order)");
}

void parse_descr(const std::string& path, NpyHeader& h) {
  const std::string& d = h.descr;
  const auto unsupported = [&]() { unsupported_descr(path, d); };
  if (d.size() < 3) unsupported();
  const char order = d[0];
  if (order != '<' && order != '>' && order != '|' && order != '=') unsupported();
  const std::string code = d.substr(1);
  const DTypeInfo* found = nullptr;
  for (const auto& t : kDTypes)
    if (code == std::string(1, t.kind) + std::to_string(t.size)) found = &t;
  if (!found) unsupported_descr(path, d);
  // '|' (not applicable) is only valid for single bytes; numpy never writes it otherwise.
  if (order == '|' && found->size > 1) unsupported();
  h.dtype = found->dtype;
  h.big_endian = found->size > 1 && order == '>';
}

NpyHeader read_header(formats_io::InputFile& file) {
  const std::string& path = file.path();
  const uint64_t size = file.size();
  if (size < kMagicBytes + 4)
    fail(path, "not a .npy file: only " + std::to_string(size) + " bytes");
  unsigned char prefix[12] = {};
  file.read_exact_at(0, prefix, std::min<uint64_t>(size, 12), "the .npy prefix");
  if (std::memcmp(prefix, kMagic, kMagicBytes) != 0)
    fail(path, "not a .npy file (bad magic: expected \\x93NUMPY)");
  NpyHeader h;
  h.version_major = prefix[6];
  h.version_minor = prefix[7];
  uint64_t header_len = 0;
  size_t prefix_len = 0;
  if (h.version_major == 1 && h.version_minor == 0) {
    header_len = prefix[8] | (uint64_t{prefix[9]} << 8);
    prefix_len = 10;
  } else if ((h.version_major == 2 || h.version_major == 3) && h.version_minor == 0) {
    if (size < 12) fail(path, "truncated: the version 2/3 prefix needs 12 bytes");
    header_len = prefix[8] | (uint64_t{prefix[9]} << 8) | (uint64_t{prefix[10]} << 16) |
                 (uint64_t{prefix[11]} << 24);
    prefix_len = 12;
  } else {
    fail(path, "unsupported .npy format version " + std::to_string(h.version_major) + "." +
                   std::to_string(h.version_minor) + " (1.0, 2.0 and 3.0 are supported)");
  }
  if (header_len > size - prefix_len)
    fail(path, "header length " + std::to_string(header_len) + " runs past the end of the " +
                   std::to_string(size) + "-byte file (truncated?)");
  if (header_len > kMaxHeaderBytes)
    fail(path, "header length " + std::to_string(header_len) + " exceeds the 1 MiB limit");
  std::string text(static_cast<size_t>(header_len), '\0');
  file.read_exact_at(prefix_len, text.data(), text.size(), "the .npy header");

  NpyHeader parsed = HeaderParser(path, text).parse();
  parsed.version_major = h.version_major;
  parsed.version_minor = h.version_minor;
  parse_descr(path, parsed);
  parsed.data_offset = prefix_len + header_len;

  const size_t item = npy_dtype_size(parsed.dtype);
  uint64_t bytes = item;
  for (int64_t d : parsed.shape)
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes))
      fail(path, "shape " + shape_text(parsed.shape) + " is too large");
  parsed.data_bytes = bytes;
  const uint64_t present = size - parsed.data_offset;
  if (present < bytes)
    fail(path, "truncated: shape " + shape_text(parsed.shape) + " of dtype '" + parsed.descr +
                   "' needs " + std::to_string(bytes) + " data bytes, the file has " +
                   std::to_string(present) + " after the header");
  if (present > bytes)
    fail(path, std::to_string(present - bytes) + " bytes after the array data (shape " +
                   shape_text(parsed.shape) + " of dtype '" + parsed.descr + "' needs " +
                   std::to_string(bytes) + "; several arrays saved into one file?)");
  return parsed;
}

void swap_bytes(std::byte* data, size_t count, size_t item) {
  for (size_t i = 0; i < count; ++i) std::reverse(data + i * item, data + (i + 1) * item);
}

// Fortran order: index (i0, ..., ik) at sum i_j * prod_{m<j} d_m. Walk C order with an odometer.
void fortran_to_c(const std::byte* src, std::byte* dst, const std::vector<int64_t>& shape,
                  size_t item) {
  const size_t rank = shape.size();
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (numel == 0) return;
  std::vector<int64_t> stride(rank, 1), index(rank, 0);
  for (size_t j = 1; j < rank; ++j) stride[j] = stride[j - 1] * shape[j - 1];
  int64_t src_index = 0;
  for (int64_t c = 0; c < numel; ++c) {
    std::memcpy(dst + static_cast<size_t>(c) * item, src + static_cast<size_t>(src_index) * item,
                item);
    for (size_t j = rank; j-- > 0;) {  // last axis fastest in C order
      if (++index[j] < shape[j]) {
        src_index += stride[j];
        break;
      }
      src_index -= stride[j] * (shape[j] - 1);
      index[j] = 0;
    }
  }
}

// Reads the data of a validated header into dst, in C order and little-endian.
void read_data(formats_io::InputFile& file, const NpyHeader& h, std::byte* dst) {
  const auto n = static_cast<size_t>(h.data_bytes);
  const size_t item = npy_dtype_size(h.dtype);
  if (h.fortran_order && h.shape.size() > 1) {
    std::vector<std::byte> staged(n);
    file.read_exact_at(h.data_offset, staged.data(), n, "the array data");
    if (h.big_endian) swap_bytes(staged.data(), n / item, item);
    fortran_to_c(staged.data(), dst, h.shape, item);
    return;
  }
  file.read_exact_at(h.data_offset, dst, n, "the array data");
  if (h.big_endian) swap_bytes(dst, n / item, item);
}

std::string python_shape(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "()";
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + (shape.size() == 1 ? ",)" : ")");
}

}  // namespace

size_t npy_dtype_size(NpyDType t) { return info(t).size; }
const char* npy_dtype_name(NpyDType t) { return info(t).name; }

std::string npy_descr(NpyDType t) {
  const DTypeInfo& d = info(t);
  return std::string(1, d.size == 1 ? '|' : '<') + d.kind + std::to_string(d.size);
}

std::optional<DType> to_crest_dtype(NpyDType t) {
  switch (t) {
    case NpyDType::f16:
      return DType::f16;
    case NpyDType::f32:
      return DType::f32;
    case NpyDType::f64:
      return DType::f64;
    case NpyDType::i16:
      return DType::i16;
    case NpyDType::i32:
      return DType::i32;
    case NpyDType::i64:
      return DType::i64;
    case NpyDType::u8:
      return DType::u8;
    case NpyDType::i8:
    case NpyDType::u16:
    case NpyDType::u32:
    case NpyDType::u64:
    case NpyDType::b1:
      return std::nullopt;
  }
  return std::nullopt;
}

NpyDType to_npy_dtype(DType t) {
  switch (t) {
    case DType::f16:
      return NpyDType::f16;
    case DType::f32:
      return NpyDType::f32;
    case DType::f64:
      return NpyDType::f64;
    case DType::i16:
      return NpyDType::i16;
    case DType::i32:
      return NpyDType::i32;
    case DType::i64:
      return NpyDType::i64;
    case DType::u8:
      return NpyDType::u8;
    case DType::bf16:
      break;
  }
  throw_input("numpy has no bfloat16 dtype: convert to f32 before writing .npy");
}

int64_t NpyHeader::numel() const { return numel_of(shape); }  // the reader checked numel * itemsize

int64_t NpyArray::numel() const { return numel_of(shape); }

NpyHeader read_npy_header(const std::string& path) {
  formats_io::InputFile file(path);
  return read_header(file);
}

NpyArray read_npy(const std::string& path) {
  formats_io::InputFile file(path);
  const NpyHeader h = read_header(file);
  NpyArray a;
  a.descr = h.descr;
  a.dtype = h.dtype;
  a.shape = h.shape;
  a.data.resize(static_cast<size_t>(h.data_bytes));
  read_data(file, h, a.data.data());
  return a;
}

namespace {

// The header of `file`, checked to hold exactly `dtype` `shape`.
NpyHeader expected_header(formats_io::InputFile& file, DType dtype,
                          const std::vector<int64_t>& shape) {
  NpyHeader h = read_header(file);
  const std::optional<DType> have = to_crest_dtype(h.dtype);
  if (have != dtype || h.shape != shape)
    fail(file.path(), "array is " + std::string(npy_dtype_name(h.dtype)) + " ('" + h.descr + "') " +
                          shape_text(h.shape) + ", expected " + dtype_name(dtype) + " " +
                          shape_text(shape));
  return h;
}

}  // namespace

void read_npy_into(const std::string& path, DType dtype, const std::vector<int64_t>& shape,
                   void* dst) {
  formats_io::InputFile file(path);
  const NpyHeader h = expected_header(file, dtype, shape);
  if (h.data_bytes) read_data(file, h, static_cast<std::byte*>(dst));
}

uint64_t read_npy_block_into(const std::string& path, DType dtype,
                             const std::vector<int64_t>& shape, const std::vector<int64_t>& begin,
                             const std::vector<int64_t>& end, void* dst) {
  CREST_CHECK(begin.size() == end.size() && begin.size() <= shape.size(),
              "read_npy_block_into: a block of more axes than the array's");
  formats_io::InputFile file(path);
  const NpyHeader h = expected_header(file, dtype, shape);
  const size_t item = npy_dtype_size(h.dtype);
  if (h.fortran_order && shape.size() > 1) {
    std::vector<int64_t> start(shape.size(), 0), count = shape;
    for (size_t a = 0; a < begin.size(); ++a) {
      start[a] = begin[a];
      count[a] = end[a] - begin[a];
    }
    std::vector<std::byte> whole(static_cast<size_t>(h.data_bytes));
    read_data(file, h, whole.data());
    box_transfer(whole.data(), BoxAt{shape, start}, dst,
                 BoxAt{count, std::vector<int64_t>(count.size(), 0)}, count, dtype, BoxOp::copy);
    return h.data_bytes;
  }
  auto* out = static_cast<std::byte*>(dst);
  uint64_t read = 0;
  for (const ByteRange& run : c_order_block_ranges(shape, item, h.data_offset, begin, end)) {
    file.read_exact_at(run.offset, out, static_cast<size_t>(run.bytes), "the array data");
    if (h.big_endian) swap_bytes(out, static_cast<size_t>(run.bytes / item), item);
    out += run.bytes;
    read += run.bytes;
  }
  return read;
}

std::vector<ByteRange> npy_block_ranges(const NpyHeader& h, const std::vector<int64_t>& begin,
                                        const std::vector<int64_t>& end) {
  CREST_CHECK(begin.size() == end.size() && begin.size() <= h.shape.size(),
              "npy_block_ranges: a block of more axes than the array's");
  if (h.fortran_order && h.shape.size() > 1) return {{h.data_offset, h.data_bytes}};
  return c_order_block_ranges(h.shape, npy_dtype_size(h.dtype), h.data_offset, begin, end);
}

void write_npy(const std::string& path, DType dtype, const std::vector<int64_t>& shape,
               const void* data) {
  write_npy(path, to_npy_dtype(dtype), shape, data);
}

void write_npy(const std::string& path, NpyDType dtype, const std::vector<int64_t>& shape,
               const void* data) {
  uint64_t bytes = npy_dtype_size(dtype);
  for (int64_t d : shape) {
    if (d < 0) fail(path, "cannot write shape " + shape_text(shape) + ": negative dimension");
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes))
      fail(path, "cannot write shape " + shape_text(shape) + ": too large");
  }
  if (bytes > 0 && data == nullptr) fail(path, "cannot write: no data");

  // Exactly numpy 1.24's _write_array_header: keys sorted, repr() values, spare spaces so the
  // first axis can grow in place, then padding to a multiple of 64 ending in '\n'.
  std::string header = "{'descr': '" + npy_descr(dtype) +
                       "', 'fortran_order': False, 'shape': " + python_shape(shape) + ", }";
  if (!shape.empty()) header.append(kGrowthAxisMaxDigits - std::to_string(shape[0]).size(), ' ');
  auto wrap = [&](size_t prefix_len) {
    const size_t hlen = header.size() + 1;
    const size_t pad = kAlign - (prefix_len + hlen) % kAlign;
    return header + std::string(pad, ' ') + "\n";
  };
  std::string text = wrap(10);
  std::string prefix(kMagic, kMagicBytes);
  if (text.size() < 65536) {
    prefix += std::string{'\x01', '\x00'};
    prefix += static_cast<char>(text.size() & 0xff);
    prefix += static_cast<char>(text.size() >> 8);
  } else {
    text = wrap(12);
    prefix += std::string{'\x02', '\x00'};
    for (int i = 0; i < 4; ++i) prefix += static_cast<char>((text.size() >> (8 * i)) & 0xff);
  }

  AtomicOutputFile out(path);
  out.write(prefix.data(), prefix.size());
  out.write(text.data(), text.size());
  if (bytes) out.write(data, static_cast<size_t>(bytes));
  out.commit();
}

}  // namespace crest
