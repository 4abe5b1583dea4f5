// The command line as a function (command_line.hpp): builds the CLI11 app with every
// subcommand, parses, runs the chosen one, and turns every error into an Outcome.
#include "command_line.hpp"

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>

#include "commands.hpp"
#include "config_file.hpp"
#include "help_format.hpp"
#include "near_miss.hpp"
#include "ringtrain/framework/error.hpp"

namespace ringtrain::cli {

namespace {

Outcome failure(int code, Outcome::Scope scope, std::string message) {
  return Outcome{code, scope, std::move(message)};
}

}  // namespace

Outcome run_command_line(const std::vector<std::string>& args, const ResultsObserver& on_results) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const bool leader = rank == 0;

  CLI::App app{
      "ringtrain: synchronous data-parallel training on CPUs over MPI.\n"
      "Run under mpiexec (mpiexec -n 2 ringtrain train) or alone (one rank)."};
  app.formatter(make_help_formatter());  // before the subcommands, which inherit it
  app.require_subcommand(1);
  app.set_version_flag("--version", RINGTRAIN_VERSION);
  Runner run;
  add_train(app, run, on_results);
  add_inspect(app, run);
  add_eval(app, run);
  add_model(app, run, leader);
  CLI::App* bench = app.add_subcommand("bench", "benchmarks that print ratios against a peer");
  bench->require_subcommand(1);
  add_bench_allreduce(*bench, run);

  try {
    std::vector<std::string> expanded = args;
    expanded.insert(expanded.begin(), "ringtrain");
    expanded = expand_config_files(expanded, app);
    expanded.erase(expanded.begin());                // CLI11 takes them without argv[0],
    std::reverse(expanded.begin(), expanded.end());  // last one first
    app.parse(expanded);
  } catch (const UsageError& e) {
    return failure(2, Outcome::Scope::kAgreed, e.what());
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help, --version
      if (leader) app.exit(e);
      return {};
    }
    return failure(2, Outcome::Scope::kAgreed,
                   std::string(e.what()) + near_miss_hint(app, args) + " (see 'ringtrain --help')");
  }

  try {
    const int code = run();
    return Outcome{code, code == 0 ? Outcome::Scope::kNone : Outcome::Scope::kAgreed, ""};
  } catch (const UsageError& e) {
    return failure(2, Outcome::Scope::kAgreed, e.what());
  } catch (const AgreedError& e) {
    return failure(1, Outcome::Scope::kAgreed, e.what());
  } catch (const std::exception& e) {
    return failure(1, Outcome::Scope::kRank, e.what());
  }
}

}  // namespace ringtrain::cli
