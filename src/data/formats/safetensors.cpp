#include "crest/data/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "crest/core/atomic_file.hpp"
#include "crest/core/error.hpp"
#include "crest/core/utf8.hpp"

namespace crest {

namespace {

using json = nlohmann::json;

// The Python/Rust implementation refuses headers above 100 MB; so do we, which also bounds what a
// corrupt length field can make us parse.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct DTypeInfo {
  SafetensorsDType dtype;
  const char* name;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {SafetensorsDType::F64, "F64", 8},   {SafetensorsDType::F32, "F32", 4},
    {SafetensorsDType::F16, "F16", 2},   {SafetensorsDType::BF16, "BF16", 2},
    {SafetensorsDType::I64, "I64", 8},   {SafetensorsDType::I32, "I32", 4},
    {SafetensorsDType::I16, "I16", 2},   {SafetensorsDType::I8, "I8", 1},
    {SafetensorsDType::U64, "U64", 8},   {SafetensorsDType::U32, "U32", 4},
    {SafetensorsDType::U16, "U16", 2},   {SafetensorsDType::U8, "U8", 1},
    {SafetensorsDType::BOOL, "BOOL", 1},
};

const DTypeInfo& info(SafetensorsDType t) {
  for (const auto& d : kDTypes)
    if (d.dtype == t) return d;
  throw_runtime("internal error: unhandled SafetensorsDType");
}

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw_input(path + ": " + what);
}

// Refuses a name, key or value the JSON header cannot hold, naming it.
void check_utf8(const std::string& path, const std::string& what, const std::string& text) {
  const size_t at = invalid_utf8_at(text);
  if (at != std::string_view::npos)
    fail(path, what + " is not valid UTF-8 (byte " + std::to_string(at) +
                   "), which a safetensors header (JSON) cannot hold");
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Parses the header and reports the first duplicated key, which nlohmann would otherwise resolve
// silently (last one wins) and so hide a tensor.
json parse_header(const std::string& path, const char* text, size_t n) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  auto track = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == json::parse_event_t::key && !open_objects.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text, text + n, track);
  } catch (const json::exception& e) {
    fail(path, std::string("invalid JSON header: ") + e.what());
  }
  if (!duplicate.empty()) fail(path, "duplicate key \"" + duplicate + "\" in the JSON header");
  if (!header.is_object()) fail(path, "the JSON header is not an object");
  return header;
}

// Reads a non-negative JSON integer (shape entries, offsets); `what` names it in errors.
uint64_t json_uint(const std::string& path, const json& v, const std::string& what) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) fail(path, what + " is negative (" + v.dump() + ")");
  fail(path, what + " must be a non-negative integer, got " + v.dump());
}

SafetensorsTensor parse_entry(const std::string& path, const std::string& name, const json& v,
                              size_t buffer_bytes) {
  const std::string where = "tensor \"" + name + "\"";
  if (!v.is_object()) fail(path, where + ": header entry is not an object");
  for (const auto& [key, unused] : v.items()) {
    (void)unused;
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      fail(path, where + ": unexpected field \"" + key + "\"");
  }
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!v.contains(key)) fail(path, where + ": missing field \"" + key + "\"");

  SafetensorsTensor t;
  t.name = name;
  const json& dt = v.at("dtype");
  if (!dt.is_string()) fail(path, where + ": dtype must be a string, got " + dt.dump());
  const auto& dname = dt.get_ref<const std::string&>();
  const DTypeInfo* found = nullptr;
  for (const auto& d : kDTypes)
    if (dname == d.name) found = &d;
  if (!found) fail(path, where + ": unsupported dtype \"" + dname + "\"");
  t.dtype = found->dtype;

  const json& sh = v.at("shape");
  if (!sh.is_array()) fail(path, where + ": shape must be an array, got " + sh.dump());
  // numel * element size is computed with overflow checks: a hostile shape must not wrap around
  // to a small byte count that then passes the length check.
  uint64_t nbytes = found->size;
  for (size_t i = 0; i < sh.size(); ++i) {
    const uint64_t d = json_uint(path, sh[i], where + ": shape[" + std::to_string(i) + "]");
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(nbytes, d, &nbytes))
      fail(path, where + ": shape " + sh.dump() + " is too large");
    t.shape.push_back(static_cast<int64_t>(d));
  }

  const json& off = v.at("data_offsets");
  if (!off.is_array() || off.size() != 2)
    fail(path, where + ": data_offsets must be [begin, end], got " + off.dump());
  const uint64_t begin = json_uint(path, off[0], where + ": data_offsets[0]");
  const uint64_t end = json_uint(path, off[1], where + ": data_offsets[1]");
  if (begin > end)
    fail(path, where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                   "] end before begin");
  if (end > buffer_bytes)
    fail(path, where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                   "] outside the " + std::to_string(buffer_bytes) + "-byte data buffer");
  if (end - begin != nbytes)
    fail(path, where + ": " + std::to_string(end - begin) + " data bytes, but dtype " + dname +
                   " and shape " + shape_text(t.shape) + " need " + std::to_string(nbytes));
  t.offset = static_cast<size_t>(begin);
  t.bytes = static_cast<size_t>(nbytes);
  return t;
}

}  // namespace

size_t safetensors_dtype_size(SafetensorsDType t) { return info(t).size; }
const char* safetensors_dtype_name(SafetensorsDType t) { return info(t).name; }

std::optional<DType> to_crest_dtype(SafetensorsDType t) {
  switch (t) {
    case SafetensorsDType::F64:
      return DType::f64;
    case SafetensorsDType::F32:
      return DType::f32;
    case SafetensorsDType::F16:
      return DType::f16;
    case SafetensorsDType::BF16:
      return DType::bf16;
    case SafetensorsDType::I64:
      return DType::i64;
    case SafetensorsDType::I32:
      return DType::i32;
    case SafetensorsDType::I16:
      return DType::i16;
    case SafetensorsDType::U8:
      return DType::u8;
    case SafetensorsDType::I8:
    case SafetensorsDType::U64:
    case SafetensorsDType::U32:
    case SafetensorsDType::U16:
    case SafetensorsDType::BOOL:
      return std::nullopt;
  }
  return std::nullopt;
}

SafetensorsDType to_safetensors_dtype(DType t) {
  switch (t) {
    case DType::f64:
      return SafetensorsDType::F64;
    case DType::f32:
      return SafetensorsDType::F32;
    case DType::f16:
      return SafetensorsDType::F16;
    case DType::bf16:
      return SafetensorsDType::BF16;
    case DType::i64:
      return SafetensorsDType::I64;
    case DType::i32:
      return SafetensorsDType::I32;
    case DType::i16:
      return SafetensorsDType::I16;
    case DType::u8:
      return SafetensorsDType::U8;
  }
  throw_runtime("internal error: unhandled DType");
}

int64_t SafetensorsTensor::numel() const {
  return numel_of(shape);
}  // the reader checked numel * size

Shape SafetensorsTensor::crest_shape() const {
  if (shape.size() > static_cast<size_t>(Shape::kMaxRank))
    throw_input("tensor \"" + name + "\" has rank " + std::to_string(shape.size()) +
                ", more than crest's maximum of 8");
  return Shape(shape);
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_io(path, "cannot open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw_io(path, "cannot stat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  const auto file_bytes = static_cast<uint64_t>(st.st_size);
  if (file_bytes < 8) {
    ::close(fd);
    fail(path, "truncated: " + std::to_string(file_bytes) +
                   " bytes, shorter than the 8-byte header length");
  }
  void* m = ::mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_error = m == MAP_FAILED ? errno : 0;
  ::close(fd);  // the mapping keeps the file alive
  if (m == MAP_FAILED) throw_io(path, "cannot map", map_error);
  map_ = m;
  map_bytes_ = file_bytes;

  try {
    const auto* base = static_cast<const std::byte*>(map_);
    uint64_t n = 0;
    std::memcpy(&n, base, 8);
    if constexpr (std::endian::native == std::endian::big) n = __builtin_bswap64(n);
    // Checked before anything is allocated or parsed: a corrupt length must cost nothing.
    if (n > file_bytes - 8)
      fail(path, "header length " + std::to_string(n) + " exceeds the " +
                     std::to_string(file_bytes - 8) +
                     " bytes that follow it (file truncated or not safetensors)");
    if (n > kMaxHeaderBytes)
      fail(path, "header length " + std::to_string(n) + " exceeds the 100 MiB limit");
    if (n < 2) fail(path, "header length " + std::to_string(n) + " is too small for JSON");

    const json header = parse_header(path, reinterpret_cast<const char*>(base + 8), n);
    const size_t buffer_bytes = static_cast<size_t>(file_bytes - 8 - n);
    const std::byte* buffer = base + 8 + n;

    for (const auto& [key, value] : header.items()) {
      if (key == "__metadata__") {
        if (!value.is_object()) fail(path, "__metadata__ must be an object of strings");
        for (const auto& [mk, mv] : value.items()) {
          if (!mv.is_string())
            fail(path, "__metadata__ value for \"" + mk + "\" is not a string: " + mv.dump());
          metadata_[mk] = mv.get<std::string>();
        }
        continue;
      }
      tensors_.push_back(parse_entry(path, key, value, buffer_bytes));
    }

    // The format has no holes: sorted by offset, tensors must tile the buffer exactly. Overlaps
    // would alias two tensors; gaps and trailing bytes mean the header and the data disagree.
    std::stable_sort(tensors_.begin(), tensors_.end(), [](const auto& a, const auto& b) {
      return a.offset != b.offset ? a.offset < b.offset : a.bytes < b.bytes;
    });
    size_t expected = 0;
    const SafetensorsTensor* previous = nullptr;
    for (auto& t : tensors_) {
      if (t.offset < expected)
        fail(path, "tensor \"" + t.name + "\" overlaps tensor \"" + previous->name +
                       "\" (data_offsets begin " + std::to_string(t.offset) + " < " +
                       std::to_string(expected) + ")");
      if (t.offset > expected)
        fail(path, "gap of " + std::to_string(t.offset - expected) +
                       " bytes in the data buffer before tensor \"" + t.name + "\"");
      expected = t.offset + t.bytes;
      t.data = buffer + t.offset;
      previous = &t;
    }
    if (expected != buffer_bytes)
      fail(path, std::to_string(buffer_bytes - expected) +
                     " bytes in the data buffer belong to no tensor (file has " +
                     std::to_string(buffer_bytes) + " data bytes, tensors cover " +
                     std::to_string(expected) + ")");
    for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
  } catch (...) {
    release();
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() { release(); }

void SafetensorsFile::release() {
  if (map_) ::munmap(map_, map_bytes_);
  map_ = nullptr;
  map_bytes_ = 0;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept
    : path_(std::move(o.path_)),
      map_(std::exchange(o.map_, nullptr)),
      map_bytes_(std::exchange(o.map_bytes_, 0)),
      tensors_(std::move(o.tensors_)),
      index_(std::move(o.index_)),
      metadata_(std::move(o.metadata_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    map_ = std::exchange(o.map_, nullptr);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    tensors_ = std::move(o.tensors_);
    index_ = std::move(o.index_);
    metadata_ = std::move(o.metadata_);
  }
  return *this;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& t : tensors_) out.push_back(t.name);
  return out;
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const SafetensorsTensor& SafetensorsFile::at(const std::string& name) const {
  const SafetensorsTensor* t = find(name);
  if (!t) fail(path_, "no tensor named \"" + name + "\"");
  return *t;
}

void SafetensorsFile::read_into(const std::string& name, DType dtype, const Shape& shape,
                                void* dst) const {
  const SafetensorsTensor& t = at(name);
  const std::vector<int64_t> want = shape.to_vector();
  if (t.dtype != to_safetensors_dtype(dtype) || t.shape != want)
    fail(path_, "tensor \"" + name + "\" is " + safetensors_dtype_name(t.dtype) +
                    shape_text(t.shape) + ", expected " +
                    safetensors_dtype_name(to_safetensors_dtype(dtype)) + shape_text(want));
  if (t.bytes) std::memcpy(dst, t.data, t.bytes);
}

namespace {

size_t bytes_of(const SafetensorsEntry& e) {
  return static_cast<size_t>(e.shape.numel()) * dtype_size(e.dtype);
}

}  // namespace

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<SafetensorsEntry> layout,
                                     std::map<std::string, std::string> metadata,
                                     std::function<void(size_t, size_t)> after_tensor)
    : path_(path),
      layout_(std::move(layout)),
      metadata_(std::move(metadata)),
      after_tensor_(std::move(after_tensor)) {
  // Validate everything before touching the file system.
  std::set<std::string> seen;
  for (const auto& e : layout_) {
    if (e.name.empty()) fail(path, "cannot write a tensor with an empty name");
    if (e.name == "__metadata__") fail(path, "\"__metadata__\" is reserved, not a tensor name");
    if (!seen.insert(e.name).second) fail(path, "duplicate tensor name \"" + e.name + "\"");
    check_utf8(path, "the tensor name \"" + e.name + "\"", e.name);
  }
  for (const auto& [key, value] : metadata_) {
    check_utf8(path, "the metadata key \"" + key + "\"", key);
    check_utf8(path, "the metadata value of \"" + key + "\"", value);
  }
  for (size_t i = 0; i < layout_.size(); ++i) order_.push_back(i);
  std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
    const size_t sa = dtype_size(layout_[a].dtype), sb = dtype_size(layout_[b].dtype);
    return sa != sb ? sa > sb : layout_[a].name < layout_[b].name;
  });
  const std::string text = header_text();
  uint64_t n = text.size();
  if constexpr (std::endian::native == std::endian::big) n = __builtin_bswap64(n);
  header_bytes_ = 8 + text.size();
  total_ = header_bytes_;
  for (const auto& e : layout_) total_ += bytes_of(e);
  // Temporary file, fsync, rename, directory fsync: a crash leaves the old file or the new one.
  out_ = std::make_unique<AtomicOutputFile>(path);
  out_->write(&n, 8);
  out_->write(text);
  written_ = header_bytes_;
}

SafetensorsWriter::~SafetensorsWriter() = default;

std::string SafetensorsWriter::header_text() const {
  json header = json::object();
  size_t offset = 0;
  for (size_t i : order_) {
    const SafetensorsEntry& e = layout_[i];
    const size_t bytes = bytes_of(e);
    header[e.name] = {{"dtype", safetensors_dtype_name(to_safetensors_dtype(e.dtype))},
                      {"shape", e.shape.to_vector()},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  std::string text = header.dump();
  // Space padding (valid JSON whitespace) puts the buffer at an 8-byte file offset.
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  return text;
}

void SafetensorsWriter::write_next(const void* data) {
  CREST_CHECK(next_ < order_.size(), path_ + ": more tensors written than the layout holds");
  const SafetensorsEntry& e = layout_[order_[next_++]];
  const size_t bytes = bytes_of(e);
  if (bytes > 0 && data == nullptr) fail(path_, "tensor \"" + e.name + "\" has no data");
  if (bytes) out_->write(data, bytes);
  written_ += bytes;
  if (after_tensor_) after_tensor_(written_, total_);
}

void SafetensorsWriter::replace_metadata(const std::string& key, const std::string& value) {
  const auto it = metadata_.find(key);
  CREST_CHECK(it != metadata_.end() && it->second.size() == value.size(),
              path_ + ": metadata '" + key + "' replaced by a value of another length");
  it->second = value;
  const std::string text = header_text();
  CREST_CHECK(8 + text.size() == header_bytes_, path_ + ": the header changed its length");
  out_->write_at(8, text.data(), text.size());
}

void SafetensorsWriter::commit() {
  CREST_CHECK(next_ == order_.size(), path_ + ": committed before every tensor was written");
  out_->commit();
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                       const std::map<std::string, std::string>& metadata,
                       const std::function<void(size_t written, size_t total)>& after_tensor) {
  for (const auto& e : tensors)
    if (e.shape.numel() > 0 && e.data == nullptr)
      fail(path, "tensor \"" + e.name + "\" has no data");
  SafetensorsWriter out(path, tensors, metadata, after_tensor);
  for (size_t i : out.order()) out.write_next(tensors[i].data);
  out.commit();
}

}  // namespace crest
