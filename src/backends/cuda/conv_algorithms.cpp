// Choosing cuDNN's convolution algorithms (conv_algorithms.hpp): by measurement, cached per
// problem, or by cuDNN's heuristics.
#include "cuda/conv_algorithms.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>

#include "crest/core/env_setting.hpp"
#include "cuda/check.hpp"

namespace crest::cuda {
namespace {

// Workspace an algorithm may ask for: beyond this the next-ranked algorithm is taken.
constexpr size_t kMaxWorkspaceBytes = size_t{1} << 30;

template <typename Perf>
Perf first_deterministic(const Perf* perf, int count, size_t max_workspace, const char* pass) {
  for (int i = 0; i < count; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].determinism == CUDNN_DETERMINISTIC &&
        perf[i].memory <= max_workspace)
      return perf[i];
  throw CudnnUnsupported(std::string("cuDNN offers no deterministic ") + pass +
                         " algorithm for this convolution");
}

enum class Choice { measured, heuristic, im2col };

Choice choice() {
  return env_setting<Choice>(
      "CREST_CUDNN_ALGORITHMS",
      {{"", Choice::measured, "as measured"},
       {"measured", Choice::measured, "the fastest deterministic algorithm, timed"},
       {"heuristic", Choice::heuristic, "cuDNN's heuristic ranking"},
       {"im2col", Choice::im2col, "crest's weight gradient wherever it applies"}});
}

ConvAlgorithms from_heuristics(const ConvProblem& p) {
  ConvAlgorithms a;
  int n = 0;
  if (p.fwd) {
    std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> r{};
    CREST_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(p.handle, p.in, p.filter, p.conv, p.out,
                                                       static_cast<int>(r.size()), &n, r.data()));
    const auto best = first_deterministic(r.data(), n, kMaxWorkspaceBytes, "forward");
    a.fwd = best.algo;
    a.workspace_bytes = std::max(a.workspace_bytes, best.memory);
  }
  if (p.bwd_data) {
    std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> r{};
    CREST_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        p.handle, p.filter, p.out, p.conv, p.in, static_cast<int>(r.size()), &n, r.data()));
    const auto best = first_deterministic(r.data(), n, kMaxWorkspaceBytes, "backward-data");
    a.bwd_data = best.algo;
    a.workspace_bytes = std::max(a.workspace_bytes, best.memory);
  }
  if (p.bwd_filter) {
    std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> r{};
    CREST_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        p.handle, p.in, p.out, p.conv, p.filter, static_cast<int>(r.size()), &n, r.data()));
    const auto best = first_deterministic(r.data(), n, kMaxWorkspaceBytes, "backward-filter");
    a.bwd_filter = best.algo;
    a.workspace_bytes = std::max(a.workspace_bytes, best.memory);
  }
  return a;
}

// Device memory for the measurement only, freed when the choice is made.
class ScratchBuffer {
 public:
  explicit ScratchBuffer(size_t bytes) {
    if (bytes == 0) return;
    const cudaError_t err = cudaMalloc(&p_, bytes);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      throw_input("cuda memory: cannot allocate " + std::to_string(bytes) +
                  " bytes to measure a convolution's algorithms: use a smaller batch or sample");
    }
    CREST_CUDA(err);
    CREST_CUDA(cudaMemset(p_, 0, bytes));
  }
  ~ScratchBuffer() {
    if (p_) cudaFree(p_);
  }
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
};

// The workspace the measurement offers: the cap, or half of what the device has free.
size_t measurement_workspace_bytes() {
  size_t free = 0, total = 0;
  CREST_CUDA(cudaMemGetInfo(&free, &total));
  return std::min(kMaxWorkspaceBytes, free / 2);
}

// The im2col weight gradient's time on the scratch tensors: the better of two runs after a
// warm-up, as cuDNN's own measurement times each algorithm.
float gemm_milliseconds(const ConvProblem& p, void* x, void* dy, void* dw) {
  const ScratchBuffer columns(p.gemm->scratch_bytes());
  cudaStream_t stream = nullptr;
  CREST_CUDNN(cudnnGetStream(p.handle, &stream));
  cudaEvent_t start = nullptr, stop = nullptr;
  CREST_CUDA(cudaEventCreate(&start));
  CREST_CUDA(cudaEventCreate(&stop));
  float best = 1e30f;
  for (int i = 0; i < 3; ++i) {
    CREST_CUDA(cudaEventRecord(start, stream));
    p.gemm->run(p.blas, stream, static_cast<const float*>(x), static_cast<const float*>(dy),
                static_cast<float*>(dw), static_cast<float*>(columns.get()));
    CREST_CUDA(cudaEventRecord(stop, stream));
    CREST_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CREST_CUDA(cudaEventElapsedTime(&ms, start, stop));
    if (i > 0) best = std::min(best, ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

ConvAlgorithms by_measurement(const ConvProblem& p) {
  const ScratchBuffer in(p.in_bytes), out(p.out_bytes), filter(p.filter_bytes);
  const size_t ws_bytes = measurement_workspace_bytes();
  const ScratchBuffer ws(ws_bytes);
  ConvAlgorithms a;
  a.measured = true;
  int n = 0;
  if (p.fwd) {
    std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> r{};
    CREST_CUDNN(cudnnFindConvolutionForwardAlgorithmEx(
        p.handle, p.in, in.get(), p.filter, filter.get(), p.conv, p.out, out.get(),
        static_cast<int>(r.size()), &n, r.data(), ws.get(), ws_bytes));
    const auto best = first_deterministic(r.data(), n, ws_bytes, "forward");
    a.fwd = best.algo;
    a.workspace_bytes = std::max(a.workspace_bytes, best.memory);
  }
  if (p.bwd_data) {
    std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> r{};
    CREST_CUDNN(cudnnFindConvolutionBackwardDataAlgorithmEx(
        p.handle, p.filter, filter.get(), p.out, out.get(), p.conv, p.in, in.get(),
        static_cast<int>(r.size()), &n, r.data(), ws.get(), ws_bytes));
    const auto best = first_deterministic(r.data(), n, ws_bytes, "backward-data");
    a.bwd_data = best.algo;
    a.workspace_bytes = std::max(a.workspace_bytes, best.memory);
  }
  if (p.bwd_filter) {
    std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> r{};
    CREST_CUDNN(cudnnFindConvolutionBackwardFilterAlgorithmEx(
        p.handle, p.in, in.get(), p.out, out.get(), p.conv, p.filter, filter.get(),
        static_cast<int>(r.size()), &n, r.data(), ws.get(), ws_bytes));
    const auto best = first_deterministic(r.data(), n, ws_bytes, "backward-filter");
    a.bwd_filter = best.algo;
    if (p.gemm && gemm_milliseconds(p, in.get(), out.get(), filter.get()) < best.time) {
      a.bwd_filter_gemm = true;
      a.workspace_bytes = std::max(a.workspace_bytes, p.gemm->scratch_bytes());
    } else {
      a.workspace_bytes = std::max(a.workspace_bytes, best.memory);
    }
  }
  return a;
}

// The choice as the tuned choices keep it: "fwd 1 bwd-data 3 bwd-filter im2col", the passes
// that run only.
std::string describe(const ConvProblem& p, const ConvAlgorithms& a) {
  std::string text;
  if (p.fwd) text += " fwd " + std::to_string(static_cast<int>(a.fwd));
  if (p.bwd_data) text += " bwd-data " + std::to_string(static_cast<int>(a.bwd_data));
  if (p.bwd_filter)
    text += " bwd-filter " + (a.bwd_filter_gemm ? std::string("im2col")
                                                : std::to_string(static_cast<int>(a.bwd_filter)));
  return text.empty() ? text : text.substr(1);
}

// An algorithm number of a kept choice: a whole number below `count`.
template <typename Algo>
bool parse_algorithm(const std::string& word, int count, Algo& algo) {
  if (word.empty() || word.size() > 3 || word.find_first_not_of("0123456789") != std::string::npos)
    return false;
  const int v = std::stoi(word);
  if (v >= count) return false;
  algo = static_cast<Algo>(v);
  return true;
}

// A kept choice back as algorithms, with the workspace they need; false where the text does not
// describe this problem's passes (another version's, or damaged).
bool from_description(const ConvProblem& p, const std::string& text, ConvAlgorithms& a) {
  std::istringstream in(text);
  std::string pass, value;
  bool fwd = false, bwd_data = false, bwd_filter = false;
  while (in >> pass >> value) {
    if (pass == "fwd" && p.fwd && !fwd) {
      fwd = parse_algorithm(value, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, a.fwd);
      if (!fwd) return false;
    } else if (pass == "bwd-data" && p.bwd_data && !bwd_data) {
      bwd_data = parse_algorithm(value, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, a.bwd_data);
      if (!bwd_data) return false;
    } else if (pass == "bwd-filter" && p.bwd_filter && !bwd_filter) {
      a.bwd_filter_gemm = value == "im2col" && p.gemm;
      bwd_filter = a.bwd_filter_gemm ||
                   parse_algorithm(value, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, a.bwd_filter);
      if (!bwd_filter) return false;
    } else {
      return false;
    }
  }
  if (fwd != p.fwd || bwd_data != p.bwd_data || bwd_filter != p.bwd_filter) return false;
  size_t bytes = 0;
  if (p.fwd) {
    CREST_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(p.handle, p.in, p.filter, p.conv, p.out,
                                                        a.fwd, &bytes));
    a.workspace_bytes = std::max(a.workspace_bytes, bytes);
  }
  if (p.bwd_data) {
    CREST_CUDNN(cudnnGetConvolutionBackwardDataWorkspaceSize(p.handle, p.filter, p.out, p.conv,
                                                             p.in, a.bwd_data, &bytes));
    a.workspace_bytes = std::max(a.workspace_bytes, bytes);
  }
  if (p.bwd_filter && a.bwd_filter_gemm) {
    a.workspace_bytes = std::max(a.workspace_bytes, p.gemm->scratch_bytes());
  } else if (p.bwd_filter) {
    CREST_CUDNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(p.handle, p.in, p.out, p.conv,
                                                               p.filter, a.bwd_filter, &bytes));
    a.workspace_bytes = std::max(a.workspace_bytes, bytes);
  }
  a.measured = true;
  return true;
}

// The run's kept choice for `problem` (a resumed run's record first, then under crest.autotune
// the machine's cache) into `a`; false where there is none.
bool kept_choice(const ConvProblem& p, const std::string& problem, ConvAlgorithms& a) {
  const std::optional<std::string> known = p.tuned ? p.tuned->known(problem) : std::nullopt;
  if (!known) return false;
  if (!from_description(p, *known, a))
    throw_input("cuda: the kept cuDNN algorithms '" + *known + "' for " + problem +
                " do not fit this convolution (the run's record " + p.tuned->record_path() +
                " or the cache " + p.tuned->cache_path() + " is damaged): delete it");
  return true;
}

}  // namespace

ConvAlgorithms choose_conv_algorithms(const ConvProblem& p) {
  const Choice how = choice();
  if (how != Choice::measured) {
    ConvAlgorithms a = from_heuristics(p);
    if (how == Choice::im2col && p.gemm && p.bwd_filter) {  // wherever it applies (tests)
      a.bwd_filter_gemm = true;
      a.gemm_column_bytes = 1024;
      GemmWeightGrad small = *p.gemm;
      small.column_bytes = a.gemm_column_bytes;
      a.workspace_bytes = std::max(a.workspace_bytes, small.scratch_bytes());
    }
    return a;
  }
  static std::mutex mutex;
  static std::map<std::string, ConvAlgorithms> cache;  // measured in this process
  const std::lock_guard<std::mutex> lock(mutex);
  const std::string problem = "cudnn " + p.key;
  ConvAlgorithms a;
  bool measured_now = false;
  if (!kept_choice(p, problem, a)) {
    if (const auto it = cache.find(p.key); it != cache.end()) {
      a = it->second;
    } else {
      // cuDNN runs the candidates on the handle's stream: earlier work there must not be timed.
      cudaStream_t stream = nullptr;
      CREST_CUDNN(cudnnGetStream(p.handle, &stream));
      CREST_CUDA(cudaStreamSynchronize(stream));
      a = by_measurement(p);
      cache.emplace(p.key, a);
      measured_now = true;
    }
  }
  // Into the run's record; a new measurement under crest.autotune into the machine's cache too.
  if (p.tuned) p.tuned->remember(problem, describe(p, a), measured_now && p.tuned->measures());
  return a;
}

}  // namespace crest::cuda
