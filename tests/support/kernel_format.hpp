// Test support for the CUDA backend's tests: a kernel that computes in a layout of its own
// (channels-last) beside values the tests keep plain (MirroredValues). Its inputs are reordered
// into its format on the device and its outputs back, with the backend's own reorders (exact:
// CudaAgreement.LayoutReordersMoveBytesAsTheReference), so every comparison stays on plain
// values; for a plain kernel the values pass through untouched.
#pragma once
#include <memory>

#include "crest/backends/kernels.hpp"
#include "crest/core/tensor.hpp"
#include "support/mirrored_values.hpp"

namespace crest::test {

class InKernelFormat {
 public:
  InKernelFormat(Backend& cuda, const MemFormat& format)
      : cuda_(cuda),
        format_(format),
        plain_(plain_format(format.shape, format.dtype)),
        buffer_(format.bytes, 256, cuda.memory()) {}

  bool reordered() const { return format_.layout != Layout::plain; }

  // v's device values in the kernel's format, for the kernel to read.
  const void* in(const MirroredValues& v) {
    if (!reordered()) return v.dev();
    if (!to_kernel_) to_kernel_ = cuda_.reorder(plain_, format_);
    to_kernel_->execute(v.dev(), buffer_.data());
    return buffer_.data();
  }
  // Where the kernel writes a result that back() then puts into v's device values.
  void* out(const MirroredValues& v) { return reordered() ? buffer_.data() : v.dev(); }
  void back(MirroredValues& v) {
    if (!reordered()) return;
    if (!to_plain_) to_plain_ = cuda_.reorder(format_, plain_);
    to_plain_->execute(buffer_.data(), v.dev());
  }

 private:
  Backend& cuda_;
  MemFormat format_, plain_;
  Buffer buffer_;
  std::unique_ptr<ReorderKernel> to_kernel_, to_plain_;
};

}  // namespace crest::test
