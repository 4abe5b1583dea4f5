// The subcommands of the ringtrain executable. main.cpp builds the CLI11 app, calls each
// add_* to register a subcommand, parses, and runs the callback of the chosen one.
// A subcommand's run function returns the process exit code; errors are thrown as
// ringtrain::Error / UsageError and turned into one line by main.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>

namespace ringtrain::cli {

// What main hands to a subcommand when it runs (after MPI is initialised).
using Runner = std::function<int()>;

// Each registers its subcommand (and flags) on `parent` and stores in `run` the function
// main calls when that subcommand was chosen.
// `on_results`, if given, receives the run's results (the manifest's "results") on every rank.
void add_train(CLI::App& app, Runner& run,
               const std::function<void(const nlohmann::json&)>& on_results = {});
// `ringtrain inspect FILE [--verify] [--compare OTHER --rtol R]` (inspect_command.cpp)
void add_inspect(CLI::App& app, Runner& run);
// `ringtrain eval CHECKPOINT --data PATH [--predictions OUT.npy]` (eval_command.cpp): the
// checkpoint's model on the test split; collective over the ranks of the job.
void add_eval(CLI::App& app, Runner& run);
// `ringtrain model NAME|FILE.toml [--input C,H,W] [--classes K]` (model_command.cpp): the
// model's layer table; only the leader prints.
void add_model(CLI::App& app, Runner& run, bool leader);
// `ringtrain bench allreduce ...` (bench_allreduce.cpp): registers itself on the `bench`
// subcommand that main creates.
void add_bench_allreduce(CLI::App& bench, Runner& run);

}  // namespace ringtrain::cli
