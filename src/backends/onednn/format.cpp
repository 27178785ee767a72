#include "onednn/format.hpp"

#include <algorithm>
#include <numeric>

#include "crest/core/error.hpp"

namespace crest::onednn {

using dnnl::memory;

namespace {

// Two descriptors address the same bytes for every logical index: same dims and blocking, with
// strides compared only where a dimension has more than one element (oneDNN may give size-1
// dimensions any stride, which does not change the layout).
bool physically_equal(const memory::desc& a, const memory::desc& b) {
  if (a == b) return true;
  if (a.get_ndims() != b.get_ndims() || a.get_data_type() != b.get_data_type() ||
      a.get_submemory_offset() != b.get_submemory_offset())
    return false;
  if (a.get_format_kind() != memory::format_kind::blocked ||
      b.get_format_kind() != memory::format_kind::blocked)
    return false;
  if (a.get_inner_blks() != b.get_inner_blks() || a.get_inner_idxs() != b.get_inner_idxs())
    return false;
  if (a.get_dims() != b.get_dims() || a.get_padded_dims() != b.get_padded_dims() ||
      a.get_padded_offsets() != b.get_padded_offsets())
    return false;
  const memory::dims padded = a.get_padded_dims(), sa = a.get_strides(), sb = b.get_strides();
  for (size_t i = 0; i < padded.size(); ++i)
    if (padded[i] > 1 && sa[i] != sb[i]) return false;
  return true;
}

// Dimension order of a blocked descriptor's outer dimensions: largest stride first; ties keep
// the logical order.
std::vector<int> outer_order(const memory::desc& d) {
  const memory::dims strides = d.get_strides();
  std::vector<int> order(strides.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return strides[static_cast<size_t>(a)] > strides[static_cast<size_t>(b)];
  });
  return order;
}

// The format tags activations and their gradients take in oneDNN's primitives, for a rank:
// plain, channels-last, and channel blocks of 4, 8 and 16 (optionally with the batch blocked
// too). Every tag oneDNN gave crest so far is among them.
std::vector<memory::format_tag> activation_tags(int ndims) {
  using tag = memory::format_tag;
  switch (ndims) {
    case 3:
      return {tag::abc, tag::acb, tag::aBc16b, tag::aBc8b, tag::aBc4b, tag::ABc16a16b};
    case 4:
      return {tag::abcd, tag::acdb, tag::aBcd16b, tag::aBcd8b, tag::aBcd4b, tag::ABcd16a16b};
    case 5:
      return {tag::abcde, tag::acdeb, tag::aBcde16b, tag::aBcde8b, tag::aBcde4b, tag::ABcde16a16b};
    default:
      return {};
  }
}

char dim_letter(int ndims, int i) {
  // Activation tensors: N, C, then the spatial names of oneDNN's tags.
  static const char* const kNames[] = {"", "a", "nc", "ncw", "nchw", "ncdhw"};
  if (ndims >= 2 && ndims <= 5) return kNames[ndims][i];
  return static_cast<char>('a' + i);
}

}  // namespace

DnnlFormat::DnnlFormat(const memory::desc& desc) : desc_(desc), name_(format_name(desc)) {}

bool DnnlFormat::equals(const OpaqueFormat& other) const {
  const auto* o = dynamic_cast<const DnnlFormat*>(&other);
  return o != nullptr && physically_equal(desc_, o->desc_);
}

memory::data_type to_dnnl(DType t) {
  switch (t) {
    case DType::f32:
      return memory::data_type::f32;
    case DType::bf16:
      return memory::data_type::bf16;
    case DType::f16:
      return memory::data_type::f16;
    case DType::i32:
      return memory::data_type::s32;
    case DType::u8:
      return memory::data_type::u8;
    default:
      break;
  }
  throw_usage("the onednn backend has no " + dtype_name(t) + " tensors");
}

memory::dims to_dims(const Shape& s) { return s.to_vector(); }

Shape to_shape(const memory::dims& d) { return Shape(std::vector<int64_t>(d.begin(), d.end())); }

memory::dims strides_for_order(const memory::dims& dims, const std::vector<int>& perm) {
  memory::dims strides(dims.size(), 0);
  memory::dim s = 1;
  for (size_t k = perm.size(); k-- > 0;) {
    const auto i = static_cast<size_t>(perm[k]);
    strides[i] = s;
    s *= dims[i];
  }
  return strides;
}

memory::desc layout_desc(const Shape& shape, DType dtype, Layout layout) {
  const memory::dims dims = to_dims(shape);
  std::vector<int> perm(dims.size());
  std::iota(perm.begin(), perm.end(), 0);
  if (layout == Layout::channels_last && perm.size() > 2) {
    // N, spatial..., C
    std::rotate(perm.begin() + 1, perm.begin() + 2, perm.end());
  }
  return memory::desc(dims, to_dnnl(dtype), strides_for_order(dims, perm));
}

memory::desc same_layout(const memory::desc& like, const memory::dims& dims) {
  CREST_CHECK(static_cast<size_t>(like.get_ndims()) == dims.size(),
              "same_layout needs a descriptor of the same rank");
  // oneDNN 3 builds blocked descriptors only from format tags: find the tag that `like` is.
  for (memory::format_tag t : activation_tags(like.get_ndims()))
    if (physically_equal(like, memory::desc(like.get_dims(), like.get_data_type(), t)))
      return memory::desc(dims, like.get_data_type(), t);
  if (like.get_inner_nblks() == 0) {
    // Any permutation without blocks: strides in the same dimension order.
    return memory::desc(dims, like.get_data_type(), strides_for_order(dims, outer_order(like)));
  }
  return memory::desc();  // a layout crest cannot name: the caller chooses another
}

memory::desc to_desc(const MemFormat& f) {
  if (f.layout != Layout::blocked) return layout_desc(f.shape, f.dtype, f.layout);
  const auto* o = dynamic_cast<const DnnlFormat*>(f.opaque.get());
  if (o == nullptr)
    throw_usage("format " + f.str() + " is blocked but was not made by the onednn backend");
  return o->desc();
}

memory::desc blocked_activation_desc(const memory::dims& dims, memory::data_type dt) {
  using tag = memory::format_tag;
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto avx512 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  const bool wide = (isa & avx512) == avx512;
  switch (dims.size()) {
    case 3:
      return {dims, dt, wide ? tag::aBc16b : tag::aBc8b};
    case 4:
      return {dims, dt, wide ? tag::aBcd16b : tag::aBcd8b};
    default:
      return {dims, dt, wide ? tag::aBcde16b : tag::aBcde8b};
  }
}

MemFormat to_mem_format(const memory::desc& d, DType dtype) {
  const Shape shape = to_shape(d.get_dims());
  for (Layout l : {Layout::plain, Layout::channels_last})
    if (physically_equal(d, layout_desc(shape, dtype, l))) return plain_format(shape, dtype, l);
  MemFormat f;
  f.shape = shape;
  f.dtype = dtype;
  f.layout = Layout::blocked;
  f.bytes = d.get_size();
  f.opaque = std::make_shared<DnnlFormat>(d);
  return f;
}

std::string format_name(const memory::desc& d) {
  if (d.get_format_kind() != memory::format_kind::blocked) return "opaque";
  const int n = d.get_ndims();
  const memory::dims blks = d.get_inner_blks(), idxs = d.get_inner_idxs();
  std::vector<bool> blocked(static_cast<size_t>(n), false);
  for (memory::dim i : idxs) blocked[static_cast<size_t>(i)] = true;
  std::string s;
  for (int i : outer_order(d)) {
    const char c = dim_letter(n, i);
    s += blocked[static_cast<size_t>(i)] ? static_cast<char>(c - 'a' + 'A') : c;
  }
  for (size_t i = 0; i < blks.size(); ++i)
    s += std::to_string(blks[i]) + dim_letter(n, static_cast<int>(idxs[i]));
  return s;
}

std::string describe(const memory::desc& d) {
  if (d.is_zero()) return "none";
  std::string t;
  switch (d.get_data_type()) {
    case memory::data_type::f32:
      t = "f32";
      break;
    case memory::data_type::bf16:
      t = "bf16";
      break;
    case memory::data_type::f16:
      t = "f16";
      break;
    case memory::data_type::s32:
      t = "i32";
      break;
    case memory::data_type::u8:
      t = "u8";
      break;
    default:
      t = "?";
      break;
  }
  return t + to_shape(d.get_dims()).str() + " " + format_name(d);
}

}  // namespace crest::onednn
