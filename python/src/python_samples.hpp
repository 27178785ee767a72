// A SampleSource over a Python dataset (any object with __len__ and __getitem__(i) -> (sample,
// target), as torch's map-style datasets): crest's loader threads read it as they read files,
// each taking the GIL only while it calls into Python, so the training step runs on.
#pragma once
#include <nanobind/nanobind.h>

#include <memory>

#include "crest/data/sample_source.hpp"
#include "crest/train/config.hpp"

namespace crest::python {

// The samples of `dataset` as the config's dataset type would give them: x float32 of
// data.sample_shape as the model reads it (channels last), y float32 [model targets] or int32
// class labels [H, W]. At most `limit` samples (0: all). `split` ("train", "validation") names
// it in errors. Call with the GIL held.
std::shared_ptr<SampleSource> python_samples(const Config& config, nanobind::object dataset,
                                             int64_t limit, const std::string& split);

}  // namespace crest::python
