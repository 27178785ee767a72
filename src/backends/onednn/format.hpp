// Translation between crest's MemFormat and oneDNN memory descriptors. Blocked formats carry the
// oneDNN descriptor itself (DnnlFormat) so a format chosen by one primitive can be handed to the
// next one unchanged.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "crest/backends/kernels.hpp"

namespace crest::onednn {

class DnnlFormat final : public OpaqueFormat {
 public:
  explicit DnnlFormat(const dnnl::memory::desc& desc);
  const dnnl::memory::desc& desc() const { return desc_; }
  bool equals(const OpaqueFormat& other) const override;
  std::string name() const override { return name_; }

 private:
  dnnl::memory::desc desc_;
  std::string name_;
};

dnnl::memory::data_type to_dnnl(DType t);
dnnl::memory::dims to_dims(const Shape& s);
Shape to_shape(const dnnl::memory::dims& d);

// Row-major strides of `dims` stored in the order `perm` (perm[0] outermost).
dnnl::memory::dims strides_for_order(const dnnl::memory::dims& dims, const std::vector<int>& perm);

// Plain (abcd...) or channels_last (acd...b) descriptor of a logical N, C, spatial... shape.
dnnl::memory::desc layout_desc(const Shape& shape, DType dtype, Layout layout);

// oneDNN's blocked activation layout for this machine's vector width (nChw16c on AVX-512, nChw8c
// below), which a primitive's `any` does not always pick. 3 to 5 dimensions.
dnnl::memory::desc blocked_activation_desc(const dnnl::memory::dims& dims,
                                           dnnl::memory::data_type dt);

// The layout of `like` (same dimension order and blocking) for a tensor of other dimensions,
// e.g. nChw16c with 48 channels from nChw16c with 16. Used to give a concat output its inputs'
// layout.
dnnl::memory::desc same_layout(const dnnl::memory::desc& like, const dnnl::memory::dims& dims);

// The oneDNN descriptor of any crest format.
dnnl::memory::desc to_desc(const MemFormat& f);

// The crest format of a descriptor a primitive chose: plain or channels_last when it is
// physically one of those (so no reorder is needed next to non-oneDNN code), blocked otherwise.
MemFormat to_mem_format(const dnnl::memory::desc& d, DType dtype);

// A short tag in the style of oneDNN's names ("nCdhw16c", "ndhwc", "abcd").
std::string format_name(const dnnl::memory::desc& d);

// For error messages: "f32[2, 4, 8, 8, 8] nCdhw16c".
std::string describe(const dnnl::memory::desc& d);

}  // namespace crest::onednn
