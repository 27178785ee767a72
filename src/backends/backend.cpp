// The Backend base: the default per-descriptor queries and the factories that ask them before
// creating a kernel, so every backend reports what it cannot do in the same words.
#include "crest/backends/kernels.hpp"
#include "crest/core/error.hpp"

namespace crest {
namespace {

Support dtype_support(const Backend& b, DType t) { return b.supports_dtype(t); }

}  // namespace

Support Backend::supports_dtype(DType dtype) const {
  if (supports(dtype)) return Support::yes();
  return Support::no(dtype_name(dtype) + " tensors are not supported by the " + name() +
                     " backend");
}

Support Backend::supports(const ConvDesc& d) const { return dtype_support(*this, d.dtype); }
Support Backend::supports(const PoolDesc& d) const { return dtype_support(*this, d.dtype); }
Support Backend::supports(const DenseDesc& d) const { return dtype_support(*this, d.dtype); }

Support Backend::supports(const EltwiseDesc& /*d*/, const MemFormat& f) const {
  return dtype_support(*this, f.dtype);
}

Support Backend::supports(const MemFormat& reorder_from, const MemFormat& reorder_to) const {
  if (Support s = dtype_support(*this, reorder_from.dtype); !s) return s;
  return dtype_support(*this, reorder_to.dtype);
}

Support Backend::supports(const std::vector<MemFormat>& concat_srcs) const {
  for (const MemFormat& f : concat_srcs)
    if (Support s = dtype_support(*this, f.dtype); !s) return s;
  return Support::yes();
}

void Backend::require(const Support& s, const std::string& what) const {
  if (!s) throw_usage("backend '" + name() + "' cannot create " + what + ": " + s.reason);
}

std::unique_ptr<ConvKernel> Backend::conv(const ConvDesc& d, const MemFormat& src_hint) {
  require(supports(d), d.transposed ? "a transposed convolution" : "a convolution");
  return create_conv(d, src_hint);
}

std::unique_ptr<PoolKernel> Backend::pool(const PoolDesc& d, const MemFormat& src_hint) {
  require(supports(d), "a pooling kernel");
  return create_pool(d, src_hint);
}

std::unique_ptr<EltwiseKernel> Backend::eltwise(const EltwiseDesc& d, const MemFormat& f) {
  require(supports(d, f), "an activation kernel for " + f.str());
  return create_eltwise(d, f);
}

std::unique_ptr<DenseKernel> Backend::dense(const DenseDesc& d) {
  require(supports(d), "a dense kernel");
  return create_dense(d);
}

std::unique_ptr<ReorderKernel> Backend::reorder(const MemFormat& from, const MemFormat& to) {
  require(supports(from, to), "a reorder " + from.str() + " -> " + to.str());
  return create_reorder(from, to);
}

std::unique_ptr<ConcatKernel> Backend::concat(const std::vector<MemFormat>& srcs) {
  require(supports(srcs), "a concatenation");
  return create_concat(srcs);
}

std::unique_ptr<VectorOps> Backend::vector_ops(DType dtype) {
  require(dtype_support(*this, dtype), "vector ops");
  return create_vector_ops(dtype);
}

}  // namespace crest
