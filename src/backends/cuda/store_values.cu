// DeviceMemory::write_values: a few host bytes stored into device memory by a one-thread kernel
// that takes them as its argument, so nothing waits and nothing is staged: the launch copies
// them, and a recorded step holds them as the kernel node's argument (updated in place with the
// next step's, cudaGraphExecUpdate).
#include <cstring>

#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"

namespace crest::cuda {
namespace {

struct ValueBytes {
  unsigned char bytes[MemoryResource::kMaxWrittenValues];
};

__global__ void store_values(unsigned char* dst, ValueBytes values, unsigned count) {
  for (unsigned i = 0; i < count; ++i) dst[i] = values.bytes[i];
}

}  // namespace

void write_values(void* dst, const void* values, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  if (bytes > MemoryResource::kMaxWrittenValues)
    throw_usage("cuda memory: write_values writes at most " +
                std::to_string(MemoryResource::kMaxWrittenValues) + " bytes, got " +
                std::to_string(bytes));
  ValueBytes v{};
  std::memcpy(v.bytes, values, bytes);
  store_values<<<1, 1, 0, stream>>>(static_cast<unsigned char*>(dst), v,
                                    static_cast<unsigned>(bytes));
  CREST_CUDA_LAUNCHED();
}

}  // namespace crest::cuda
