// The CUDA backend is a plugin (libcrest_cuda.so) that crest loads only when a run asks for it:
// a binary linked with cuDNN and cuBLAS would load them at every start-up, CPU runs included
// (0.2 s and 250 MB of resident memory per process, on ten thousand ranks). The loader in
// src/backends/cuda/loader/ registers the backend name; the plugin's one C entry point hands it
// these two functions. Both sides are crest's own code, built together by one compiler.
#pragma once
#include <memory>

#include "crest/backends/kernels.hpp"

namespace crest::cuda {

struct PluginEntry {
  Support (*available)();
  std::unique_ptr<Backend> (*make)();
};

}  // namespace crest::cuda

// Defined by the plugin; the loader looks it up with dlsym.
extern "C" const crest::cuda::PluginEntry* crest_cuda_plugin_entry();
