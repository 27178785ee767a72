// The pieces of the `crest._crest` extension module (docs/python.md): each file binds one part of
// the library, and module.cpp calls them in order.
#pragma once
#include <nanobind/nanobind.h>

namespace crest::python {

// crest.Error and its kinds, and the translation of crest::Error into them.
void bind_errors(nanobind::module_& m);
// Loading, overriding and rendering run configs.
void bind_config(nanobind::module_& m);
// crest.train: the whole trainer, with Python callbacks at the end of every epoch.
void bind_train(nanobind::module_& m);
// A compiled model for inference and weight interchange, on arrays through DLPack.
void bind_model(nanobind::module_& m);

}  // namespace crest::python
