// The native half of `import crest`: python/crest/__init__.py re-exports what this defines.
#include <nanobind/nanobind.h>

#include "bindings.hpp"

NB_MODULE(_crest, m) {
  m.doc() = "crest's native module: configs, training, compiled models (docs/python.md).";
  m.attr("__version__") = CREST_VERSION;
  crest::python::bind_errors(m);
  crest::python::bind_config(m);
  crest::python::bind_train(m);
  crest::python::bind_model(m);
}
