// ringtrain._ringtrain: the compiled half of the Python package `ringtrain` (python/ringtrain/
// holds the other half: train(**options), run.open, the re-exports). The module owns MPICH
// (session.hpp): it initialises MPI on first use and finalises it at exit.
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "errors.hpp"
#include "ringtrain/checkpoint/error.hpp"
#include "ringtrain/collectives/exact_sum.hpp"
#include "ringtrain/framework/error.hpp"
#include "session.hpp"

namespace ringtrain::python {

namespace {

PyObject* g_error = nullptr;
PyObject* g_usage_error = nullptr;
PyObject* g_checkpoint_error = nullptr;

PyObject* new_class(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  const std::string qualified = "ringtrain." + std::string(name);
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (!type) throw py::error_already_set();
  m.add_object(name, py::handle(type));
  return type;
}

}  // namespace

void register_errors(py::module_& m) {
  g_error = new_class(m, "Error", PyExc_RuntimeError,
                      "An error of ringtrain: the C++ error's message, unchanged.");
  g_usage_error =
      new_class(m, "UsageError",
                py::make_tuple(py::handle(g_error), py::handle(PyExc_ValueError)).release().ptr(),
                "Bad usage: a flag, a value, an input file (`ringtrain` exits 2 for these).");
  py::module_ ck = m.attr("checkpoint");
  const std::string qualified = "ringtrain.checkpoint.CheckpointError";
  g_checkpoint_error = PyErr_NewExceptionWithDoc(
      qualified.c_str(), "A checkpoint file was refused: the message names the file and why.",
      g_error, nullptr);
  ck.add_object("CheckpointError", py::handle(g_checkpoint_error));
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const checkpoint::CheckpointError& e) {
      PyErr_SetString(g_checkpoint_error, e.what());
    } catch (const UsageError& e) {
      PyErr_SetString(g_usage_error, e.what());
    } catch (const Error& e) {
      PyErr_SetString(g_error, e.what());
    } catch (const collectives::CollectiveError& e) {
      PyErr_SetString(g_error, e.what());
    }
  });
}

}  // namespace ringtrain::python

namespace py = pybind11;

PYBIND11_MODULE(_ringtrain, m) {
  namespace rp = ringtrain::python;
  m.doc() = "ringtrain's C++ core for Python (import ringtrain, not this module).";
  rp::bind_mpi(m);
  rp::bind_collectives(m);
  rp::bind_model(m);
  rp::bind_checkpoint(m);
  rp::bind_train(m);
  rp::register_errors(m);
  // MPI is finalised when the interpreter exits, after the program's own atexit hooks.
  py::module_::import("atexit").attr("register")(py::cpp_function([] { rp::finalize_mpi(); }));
}
