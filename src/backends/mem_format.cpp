#include <sstream>

#include "crest/backends/kernels.hpp"

namespace crest {

bool MemFormat::operator==(const MemFormat& o) const {
  if (shape != o.shape || dtype != o.dtype || layout != o.layout) return false;
  if (layout != Layout::blocked) return true;
  if (!opaque || !o.opaque) return opaque == o.opaque;
  return opaque->equals(*o.opaque);
}

std::string MemFormat::str() const {
  std::ostringstream os;
  os << dtype_name(dtype) << shape.str() << ' '
     << (layout == Layout::blocked && opaque ? opaque->name() : std::string(layout_name(layout)));
  return os.str();
}

MemFormat plain_format(const Shape& shape, DType dtype, Layout layout) {
  MemFormat f;
  f.shape = shape;
  f.dtype = dtype;
  f.layout = layout;
  f.bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  return f;
}

int64_t channel_rows(const MemFormat& f) {
  if (f.layout != Layout::channels_last) return f.shape[0];
  return f.shape[1] > 0 ? f.shape.numel() / f.shape[1] : 0;
}

Support rows_concatenable(const std::vector<MemFormat>& srcs, const std::string& backend) {
  for (const MemFormat& f : srcs)
    if (f.layout == Layout::blocked || f.layout != srcs.front().layout)
      return Support::no("the " + backend +
                         " backend concatenates tensors of one layout, plain or channels-last, "
                         "not " +
                         srcs.front().str() + " with " + f.str());
  return Support::yes();
}

}  // namespace crest
