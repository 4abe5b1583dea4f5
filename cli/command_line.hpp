// The command line as a function: parse the arguments of `ringtrain`, run the chosen
// subcommand, and say how it ended. main.cpp calls it once MPI is up and prints the outcome;
// the Python module (python/) calls it for ringtrain.train() in a process whose MPI it owns,
// and turns the outcome into a return value or an exception. Neither initialises nor
// finalises MPI here.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ringtrain::cli {

// How a command ended. The exit codes are main's (main.cpp):
//   0  success (also --help and --version, whose text is printed)
//   2  bad usage: a flag, a value, a config key, a bad input file; every rank alike
//   1  a failure every rank agreed on (AgreedError)
//   1  with kRank: this rank failed alone; the other ranks may be waiting for it
struct Outcome {
  enum class Scope { kNone, kAgreed, kRank };
  int exit_code = 0;
  Scope scope = Scope::kNone;
  std::string message;  // one line without the "ringtrain: error: " prefix; empty on success
};

// Called with the run's results (the manifest's "results" object) when `train` ends well.
using ResultsObserver = std::function<void(const nlohmann::json& results)>;

// Runs `ringtrain <args...>` (args without the program name; --config files expanded).
// Collective over MPI_COMM_WORLD, which must be initialised. Never throws.
Outcome run_command_line(const std::vector<std::string>& args,
                         const ResultsObserver& on_results = {});

}  // namespace ringtrain::cli
