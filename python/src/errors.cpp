// crest::Error as Python exceptions: one class per kind, each carrying the exit code the CLI would
// exit with, so a workflow can treat a bad config (2) and a failed run (1) as `crest` does.
#include <Python.h>

#include "bindings.hpp"
#include "crest/core/error.hpp"

namespace nb = nanobind;

namespace crest::python {
namespace {

// Owned by the module (a reference is kept in its dict), so these never dangle.
PyObject* g_usage = nullptr;
PyObject* g_input = nullptr;
PyObject* g_runtime = nullptr;

PyObject* new_error(nb::module_& m, const char* name, PyObject* bases, int exit_code,
                    const char* doc) {
  const std::string qualified = std::string("crest.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (!type) throw nb::python_error();
  nb::handle(type).attr("exit_code") = exit_code;
  m.attr(name) = nb::handle(type);
  return type;
}

}  // namespace

void bind_errors(nb::module_& m) {
  PyObject* base =
      new_error(m, "Error", PyExc_Exception, 1,
                "Any error crest reports; exit_code is what the crest CLI exits with.");
  g_usage = new_error(m, "UsageError", base, 2,
                      "A malformed call or override: fix the command (the CLI exits 2).");
  g_input = new_error(m, "InputError", base, 2,
                      "A bad config, data or weights file, named in the message (exit 2).");
  g_runtime = new_error(m, "RunError", base, 1,
                        "The run failed while working: I/O, a peer rank, resources (exit 1).");
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      PyObject* type = e.kind() == ErrorKind::usage   ? g_usage
                       : e.kind() == ErrorKind::input ? g_input
                                                      : g_runtime;
      PyErr_SetString(type, e.what());
    }
  });
}

}  // namespace crest::python
