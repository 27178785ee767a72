// CUDA graphs of the backend's stream (Stream::begin_capture, end_capture): the work queued in
// between is recorded (stream capture, this thread only), instantiated once, and on later
// recordings updated in place (cudaGraphExecUpdate: the same kernels with the new recording's
// arguments), or instantiated again where the recording's shape changed.
#include <string>

#include "cuda/check.hpp"
#include "cuda/device_memory.hpp"

namespace crest::cuda {

namespace {

class CudaGraph final : public StreamGraph {
 public:
  CudaGraph(std::shared_ptr<Context> context, cudaGraph_t graph) : context_(std::move(context)) {
    CREST_CUDA(cudaGraphInstantiate(&exec_, graph, 0));
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  ~CudaGraph() override {
    if (exec_) cudaGraphExecDestroy(exec_);  // errors ignored: a destructor must not throw
  }

  bool runs_on(const Context& context) const { return context_.get() == &context; }
  // Takes over `graph`'s arguments; false where its nodes are not this graph's.
  bool update(cudaGraph_t graph) {
    cudaGraphExecUpdateResultInfo info{};
    if (cudaGraphExecUpdate(exec_, graph, &info) == cudaSuccess) return true;
    static_cast<void>(cudaGetLastError());  // the failed update's error is not the stream's
    return false;
  }
  void launch() override { CREST_CUDA(cudaGraphLaunch(exec_, context_->stream)); }

 private:
  std::shared_ptr<Context> context_;
  cudaGraphExec_t exec_ = nullptr;
};

// A recorded graph, destroyed however end_capture leaves (its instantiation is a copy).
struct RecordedGraph {
  RecordedGraph() = default;
  RecordedGraph(const RecordedGraph&) = delete;
  RecordedGraph& operator=(const RecordedGraph&) = delete;
  ~RecordedGraph() {
    if (graph) cudaGraphDestroy(graph);
  }
  cudaGraph_t graph = nullptr;
};

}  // namespace

void DeviceStream::begin_capture() {
  CREST_CUDA(cudaStreamBeginCapture(context_->stream, cudaStreamCaptureModeThreadLocal));
}

void DeviceStream::end_capture(std::unique_ptr<StreamGraph>& graph) {
  RecordedGraph recorded;
  const cudaError_t ended = cudaStreamEndCapture(context_->stream, &recorded.graph);
  if (ended == cudaErrorStreamCaptureInvalidated || ended == cudaErrorStreamCaptureUnjoined) {
    static_cast<void>(cudaGetLastError());
    throw_runtime(std::string("cuda: a step's recording (crest.cuda_graphs) failed: ") +
                  cudaGetErrorString(ended) +
                  ": something in it waited for the device or left work on another stream");
  }
  CREST_CUDA(ended);
  auto* earlier = dynamic_cast<CudaGraph*>(graph.get());
  if (earlier && earlier->runs_on(*context_) && earlier->update(recorded.graph)) return;
  graph = std::make_unique<CudaGraph>(context_, recorded.graph);
}

}  // namespace crest::cuda
