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
  const auto& x = a.data;
  const auto& y = b.data;
  if (x.ndims != y.ndims || x.data_type != y.data_type || x.offset0 != y.offset0) return false;
  if (x.format_kind != dnnl_blocked || y.format_kind != dnnl_blocked) return false;
  const auto& bx = x.format_desc.blocking;
  const auto& by = y.format_desc.blocking;
  if (bx.inner_nblks != by.inner_nblks) return false;
  for (int i = 0; i < bx.inner_nblks; ++i)
    if (bx.inner_blks[i] != by.inner_blks[i] || bx.inner_idxs[i] != by.inner_idxs[i]) return false;
  for (int i = 0; i < x.ndims; ++i) {
    if (x.dims[i] != y.dims[i] || x.padded_dims[i] != y.padded_dims[i]) return false;
    if (x.padded_offsets[i] != y.padded_offsets[i]) return false;
    if (x.padded_dims[i] > 1 && bx.strides[i] != by.strides[i]) return false;
  }
  return true;
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
  dnnl_memory_desc_t md = like.data;
  CREST_CHECK(md.format_kind == dnnl_blocked && static_cast<size_t>(md.ndims) == dims.size(),
              "same_layout needs a blocked descriptor of the same rank");
  auto& blk = md.format_desc.blocking;
  const int n = md.ndims;
  memory::dim block[DNNL_MAX_NDIMS];
  std::fill(block, block + n, memory::dim{1});
  memory::dim inner = 1;
  for (int i = 0; i < blk.inner_nblks; ++i) {
    block[blk.inner_idxs[i]] *= blk.inner_blks[i];
    inner *= blk.inner_blks[i];
  }
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return blk.strides[a] > blk.strides[b]; });
  for (int i = 0; i < n; ++i) {
    md.dims[i] = dims[static_cast<size_t>(i)];
    md.padded_dims[i] = (md.dims[i] + block[i] - 1) / block[i] * block[i];
    md.padded_offsets[i] = 0;
  }
  md.offset0 = 0;
  // Outer strides from the innermost outer dimension outwards, over whole inner blocks.
  memory::dim stride = inner;
  for (size_t k = order.size(); k-- > 0;) {
    const int i = order[k];
    blk.strides[i] = stride;
    stride *= md.padded_dims[i] / block[i];
  }
  return memory::desc(md);
}

memory::desc to_desc(const MemFormat& f) {
  if (f.layout != Layout::blocked) return layout_desc(f.shape, f.dtype, f.layout);
  const auto* o = dynamic_cast<const DnnlFormat*>(f.opaque.get());
  if (o == nullptr)
    throw_usage("format " + f.str() + " is blocked but was not made by the onednn backend");
  return o->desc();
}

MemFormat to_mem_format(const memory::desc& d, DType dtype) {
  const Shape shape = to_shape(d.dims());
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
  const auto& md = d.data;
  if (md.format_kind != dnnl_blocked) return "opaque";
  const auto& blk = md.format_desc.blocking;
  const int n = md.ndims;
  bool blocked[DNNL_MAX_NDIMS] = {};
  for (int i = 0; i < blk.inner_nblks; ++i) blocked[blk.inner_idxs[i]] = true;
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  // Outer dimensions from the largest stride down; ties keep the logical order.
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return blk.strides[a] > blk.strides[b]; });
  std::string s;
  for (int i : order) {
    const char c = dim_letter(n, i);
    s += blocked[i] ? static_cast<char>(c - 'a' + 'A') : c;
  }
  for (int i = 0; i < blk.inner_nblks; ++i)
    s += std::to_string(blk.inner_blks[i]) + dim_letter(n, blk.inner_idxs[i]);
  return s;
}

std::string describe(const memory::desc& d) {
  if (d.is_zero()) return "none";
  std::string t;
  switch (d.data_type()) {
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
  return t + to_shape(d.dims()).str() + " " + format_name(d);
}

}  // namespace crest::onednn
