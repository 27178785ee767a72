// NCCL collectives for the cuda backend (nccl_collectives.hpp). Each allreduce runs on a stream of
// its own, behind the compute stream's work at the moment it is queued (an event), so a bucket
// travels while backward goes on computing the next; wait() puts the compute stream behind every
// collective queued (the update reads their sums) and blocks until they are done, polling NCCL's
// asynchronous error and a deadline, the watchdog's rule: past it, or on an NCCL error, the
// communicator is aborted and the error names the collective. A step recorded as a CUDA graph
// records its collectives too (NCCL's operations can be captured): join() orders the compute
// stream behind them inside the recording, and wait_stream() is the step's timed wait after the
// launch.
#include "cuda/nccl_collectives.hpp"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>

#include "cuda/check.hpp"
#include "cuda/vector_ops.hpp"

#if __has_include(<nccl.h>)
#include <nccl.h>
#define CREST_HAVE_NCCL_H 1
#endif

namespace crest::cuda {

#ifdef CREST_HAVE_NCCL_H
namespace {

// The entry points crest calls, from libnccl.so.2 (dlopen).
struct NcclLibrary {
  std::string error;  // why it cannot be used ("" when it can)
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclCommGetAsyncError) get_async_error = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
};

template <typename F>
void find(void* handle, const char* name, F& f, std::string& error) {
  f = reinterpret_cast<F>(dlsym(handle, name));
  if (!f && error.empty()) error = std::string("libnccl.so.2 has no ") + name;
}

NcclLibrary load_nccl() {
  NcclLibrary lib;
  if (const char* v = std::getenv("CREST_CUDA_NCCL"); v && std::string(v) == "0") {
    lib.error = "CREST_CUDA_NCCL=0";
    return lib;
  }
  void* handle = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);  // kept for the process's life
  if (!handle) {
    const char* why = dlerror();
    lib.error = std::string("cannot load NCCL (") + (why ? why : "libnccl.so.2") + ")";
    return lib;
  }
  find(handle, "ncclGetUniqueId", lib.get_unique_id, lib.error);
  find(handle, "ncclCommInitRank", lib.comm_init_rank, lib.error);
  find(handle, "ncclAllReduce", lib.all_reduce, lib.error);
  find(handle, "ncclCommDestroy", lib.comm_destroy, lib.error);
  find(handle, "ncclCommAbort", lib.comm_abort, lib.error);
  find(handle, "ncclCommGetAsyncError", lib.get_async_error, lib.error);
  find(handle, "ncclGetErrorString", lib.error_string, lib.error);
  return lib;
}

const NcclLibrary& nccl() {
  static const NcclLibrary lib = load_nccl();
  return lib;
}

void check(ncclResult_t r, const char* call) {
  if (r != ncclSuccess)
    throw_runtime(std::string("NCCL: ") + nccl().error_string(r) + " in " + call);
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::bf16:
      return ncclBfloat16;
    case DType::f16:
      return ncclFloat16;
    default:
      throw_usage("NCCL collectives take f32, f64, bf16 or f16 values, not " + dtype_name(t));
  }
}

class NcclCollectives final : public DeviceCollectives {
 public:
  NcclCollectives(std::shared_ptr<Context> context, int rank, int ranks,
                  const std::function<void(void*, size_t)>& share_from_first)
      : c_(std::move(context)) {
    ncclUniqueId id{};
    if (rank == 0) check(nccl().get_unique_id(&id), "ncclGetUniqueId");
    share_from_first(&id, sizeof id);
    CREST_CUDA(cudaSetDevice(c_->device));
    CREST_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CREST_CUDA(cudaEventCreateWithFlags(&queued_, cudaEventDisableTiming));
    CREST_CUDA(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    CREST_CUDA(cudaEventCreateWithFlags(&stream_done_, cudaEventDisableTiming));
    check(nccl().comm_init_rank(&comm_, ranks, id, rank), "ncclCommInitRank");
  }
  ~NcclCollectives() override {
    // Never throws: an aborted communicator is gone already.
    if (comm_ && !aborted_) nccl().comm_destroy(comm_);
    if (stream_done_) cudaEventDestroy(stream_done_);
    if (done_) cudaEventDestroy(done_);
    if (queued_) cudaEventDestroy(queued_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  NcclCollectives(const NcclCollectives&) = delete;
  NcclCollectives& operator=(const NcclCollectives&) = delete;

  std::string name() const override { return "nccl"; }

  void allreduce_sum(void* values, size_t n, DType dtype, double scale) override {
    if (aborted_) throw_runtime("NCCL: the communicator was aborted by an earlier failure");
    CREST_CUDA(cudaEventRecord(queued_, c_->stream));
    CREST_CUDA(cudaStreamWaitEvent(stream_, queued_, 0));
    check(nccl().all_reduce(values, values, n, nccl_type(dtype), ncclSum, comm_, stream_),
          "ncclAllReduce");
    if (scale != 1.0) ops(dtype).scale(scale, values, values, n);
    queued_since_join_ = true;
  }

  void wait(double timeout_s, const std::string& what) override {
    join();
    poll(done_, timeout_s, what);
  }

  // Only where a collective was queued since the last join: an event of the collectives' stream
  // recorded outside a recording cannot be waited for inside one.
  void join() override {
    if (!queued_since_join_) return;
    queued_since_join_ = false;
    CREST_CUDA(cudaEventRecord(done_, stream_));
    CREST_CUDA(cudaStreamWaitEvent(c_->stream, done_, 0));
  }

  void wait_stream(double timeout_s, const std::string& what) override {
    CREST_CUDA(cudaEventRecord(stream_done_, c_->stream));
    poll(stream_done_, timeout_s, what);
  }

 private:
  // Until `event` completes, NCCL reports an error, or the deadline passes (then the
  // communicator is aborted).
  void poll(cudaEvent_t event, double timeout_s, const std::string& what) {
    const auto start = std::chrono::steady_clock::now();
    auto pause = std::chrono::microseconds(20);
    for (;;) {
      const cudaError_t state = cudaEventQuery(event);
      if (state == cudaSuccess) return;
      if (state != cudaErrorNotReady) CREST_CUDA(state);
      ncclResult_t async = ncclSuccess;
      check(nccl().get_async_error(comm_, &async), "ncclCommGetAsyncError");
      if (async != ncclSuccess && async != ncclInProgress)
        fail(what + ": " + nccl().error_string(async));
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > timeout_s)
        fail(what + " did not complete within " + std::to_string(timeout_s) +
             " s (dist.timeout_s): a rank stopped responding");
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }

  [[noreturn]] void fail(const std::string& text) {
    aborted_ = true;
    nccl().comm_abort(comm_);
    throw_runtime("NCCL: " + text + " (communicator aborted)");
  }

  // The scaling kernels, on the collectives' stream.
  VectorOps& ops(DType dtype) {
    auto& o = ops_[dtype];
    if (!o) o = make_vector_ops(dtype, stream_);
    return *o;
  }

  std::shared_ptr<Context> c_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t queued_ = nullptr, done_ = nullptr, stream_done_ = nullptr;
  bool queued_since_join_ = false;
  std::map<DType, std::unique_ptr<VectorOps>> ops_;
  bool aborted_ = false;
};

}  // namespace

Support nccl_available() {
  const std::string& error = nccl().error;
  return error.empty() ? Support::yes() : Support::no(error);
}

std::unique_ptr<DeviceCollectives> make_nccl_collectives(
    std::shared_ptr<Context> context, int rank, int ranks,
    const std::function<void(void* data, size_t bytes)>& share_from_first) {
  const Support s = nccl_available();
  if (!s) throw_usage("NCCL collectives: " + s.reason);
  return std::make_unique<NcclCollectives>(std::move(context), rank, ranks, share_from_first);
}

#else  // built without nccl.h

Support nccl_available() { return Support::no("crest was built without nccl.h"); }

std::unique_ptr<DeviceCollectives> make_nccl_collectives(
    std::shared_ptr<Context>, int, int, const std::function<void(void*, size_t)>&) {
  throw_usage("NCCL collectives: crest was built without nccl.h");
}

#endif

}  // namespace crest::cuda
