// ringtrain._command(args): `ringtrain ARGS...` in this process, through the very function
// the program's main runs (cli/command_line.hpp), with MPI already owned by the module. The
// package's train(**options) turns keywords into `train` flags; bench/python_allreduce.py
// runs `bench allreduce` this way, interleaved with its own timings.
//
// Outcomes, as the program's exit codes (main.cpp):
//   success     `train`: the run's results (the manifest's "results"), on every rank;
//               another subcommand: None
//   exit 2      UsageError with the program's one line, raised on every rank alike
//   exit 1      ringtrain.Error with the program's one line, on every rank alike
//   one rank    fails alone: under N > 1 the others would wait for it forever, so, as the
//               program does, it prints "ringtrain: rank R of N: error: ..." and aborts the
//               job (MPI_Abort); alone (N = 1) it raises ringtrain.Error.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <csignal>
#include <cstdio>

#include "bindings.hpp"
#include "command_line.hpp"
#include "errors.hpp"
#include "ringtrain/framework/error.hpp"
#include "session.hpp"

namespace ringtrain::python {

namespace {

// SIGXFSZ ignored while a run writes (as the program does): a file size limit then fails a
// save instead of killing the interpreter. The previous action comes back afterwards.
class IgnoreFileSizeSignal {
 public:
  IgnoreFileSizeSignal() { previous_ = std::signal(SIGXFSZ, SIG_IGN); }
  ~IgnoreFileSizeSignal() { std::signal(SIGXFSZ, previous_); }
  IgnoreFileSizeSignal(const IgnoreFileSizeSignal&) = delete;
  IgnoreFileSizeSignal& operator=(const IgnoreFileSizeSignal&) = delete;

 private:
  void (*previous_)(int) = SIG_DFL;
};

py::object command(const std::vector<std::string>& args) {
  ensure_mpi();
  ensure_contained_reader();  // --resume and inspect read checkpoints from outside a run
  std::string results;
  cli::Outcome outcome;
  {
    IgnoreFileSizeSignal ignore;
    std::fflush(stdout);
    outcome = cli::run_command_line(args, [&](const nlohmann::json& r) { results = r.dump(); });
    std::fflush(stdout);
  }
  using Scope = cli::Outcome::Scope;
  if (outcome.scope == Scope::kRank) {
    const auto& c = world()->comm();
    if (c.size() > 1) {
      std::fprintf(stderr, "ringtrain: rank %d of %d: error: %s\n", c.rank(), c.size(),
                   outcome.message.c_str());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    throw Error(outcome.message);
  }
  // Ctrl-C (or SIGINT): the run saved at the next agreed step and stopped; Python's own way
  // to say so.
  if (outcome.exit_code == 128 + SIGINT) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }
  if (outcome.exit_code == 2) throw UsageError(outcome.message);
  if (outcome.exit_code != 0) throw Error(outcome.message);
  if (results.empty()) return py::none();  // not `train`, or --help
  return py::module_::import("json").attr("loads")(results);
}

}  // namespace

void bind_train(py::module_& m) {
  m.def("_command", &command, py::arg("args"),
        "`ringtrain ARGS...` in this process (for training use ringtrain.train(**options)).");
}

}  // namespace ringtrain::python
