// `ringtrain train`: flags (and --config TOML with the same keys) into a TrainConfig, then
// the Trainer. Flags override the file; an unknown key is an error (exit 2). The flags are
// the rows of the option table (ringtrain/framework/train/options.hpp), plus the hidden
// fault-injection flags of the test suite, which fill TrainConfig::hooks.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "help_format.hpp"
#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/framework/agreed.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/options.hpp"
#include "ringtrain/framework/train/run_plan.hpp"
#include "ringtrain/framework/train/trainer.hpp"
#include "ringtrain/models/registry.hpp"

namespace ringtrain::cli {

namespace {

const char* type_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::kWhole:
      return "INT";
    case ValueKind::kReal:
      return "FLOAT";
    case ValueKind::kChoice:
      return "WORD";
    default:
      return "TEXT";
  }
}

// One row of the option table as a CLI11 flag: the text a user gives goes through the row's
// set(), so the command line and --config parse values the same way.
void add_option(CLI::App& train, const TrainOption& option,
                const std::shared_ptr<TrainConfig>& config) {
  const TrainOption* row = &option;  // the table lives for the whole program
  CLI::Option* flag = nullptr;
  if (option.kind == ValueKind::kSwitch) {
    flag = train.add_flag_callback(
        option.flag(), [row, config] { row->set(*config, "true"); }, option.help);
  } else {
    flag = train.add_option_function<std::string>(
        option.flag(), [row, config](const std::string& text) { row->set(*config, text); },
        option.help);
    flag->type_name(type_name(option.kind));
    const std::string default_text = option.default_text();
    if (!default_text.empty()) flag->default_str(default_text);
  }
  flag->group(option.hidden ? std::string() : train_topic(option.name));
}

// The layer list --model names, read before the data so that a defect costs no data load.
// Every rank reads it; they agree on the outcome, so a file one rank cannot read stops all
// ranks with exit 2 instead of leaving the others in a collective. Collective.
models::ModelSpec agreed_model_spec(const collectives::Communicator& comm,
                                    const TrainConfig& config) {
  const ModelOptions defaults;  // the spec does not depend on the data's shapes
  return agreed<UsageError, UsageError>(comm, [&] {
    return models::model_spec(config.model,
                              model_options(config, defaults.input, defaults.classes));
  });
}

}  // namespace

void add_train(CLI::App& app, Runner& run,
               const std::function<void(const nlohmann::json&)>& on_results) {
  auto config = std::make_shared<TrainConfig>();
  CLI::App* train =
      app.add_subcommand("train", "train a model on Fashion-MNIST or your own data (--data)");
  // Read by config_file.cpp before parsing; declared here for --help.
  train->add_option("--config", "TOML file whose keys are these flags' names (flags win)");
  // The last value of an option wins, so command-line flags override the --config file's.
  train->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

  for (const TrainOption& option : train_options()) add_option(*train, option, config);
  // The two ways to say how long a run is exclude each other.
  train->get_option("--epochs")->excludes(train->get_option("--steps"));
  // Fault injection for the test suite: hidden from --help (empty group), and kept out of
  // the TrainConfig, so no run directory records it as the user's configuration.
  auto faults = std::make_shared<FaultPlan>();
  FaultPlan& f = *faults;
  train->add_option("--test-nan-rank", f.nan_rank)->group("");
  train->add_option("--test-nan-step", f.nan_step)->group("");
  train->add_option("--test-perturb-rank", f.perturb_rank)->group("");
  train->add_option("--test-perturb-step", f.perturb_step)->group("");
  train->add_option("--test-hang-rank", f.hang_rank)->group("");
  train->add_option("--test-hang-step", f.hang_step)->group("");
  train->add_option("--test-hang-s", f.hang_s)->group("");
  train->add_option("--test-kill-rank", f.kill_rank)->group("");
  train->add_option("--test-kill-step", f.kill_step)->group("");
  train->add_flag("--test-kill-at-snapshot", f.kill_at_snapshot)->group("");
  train->add_option("--test-crash-phase", f.crash_phase)->group("");
  train->add_option("--test-crash-step", f.crash_step)->group("");
  train->add_option("--test-save-cost-s", f.save_cost_s)->delimiter(',')->group("");
  train->add_option("--test-fail-save-steps", f.fail_save_steps)->delimiter(',')->group("");
  train->add_option("--test-step-s", f.step_s)->group("");
  train->add_option("--test-pause-step", f.pause_steps)->delimiter(',')->group("");
  train->add_option("--test-pause-file", f.pause_file)->group("");
  auto slow_rank = std::make_shared<std::string>();
  train->add_option("--test-slow-rank", *slow_rank)->group("");
  train->add_option("--test-split-alone-rank", f.split_alone_rank)->group("");
  train->add_flag("--test-ignore-core-wait", f.ignore_core_wait)->group("");

  train->callback([&run, config, faults, slow_rank, on_results] {
    run = [config, faults, slow_rank, on_results]() -> int {
      collectives::Communicator comm;
      if (!slow_rank->empty()) parse_slow_rank(*slow_rank, *faults, comm.size());
      const models::ModelSpec spec = agreed_model_spec(comm, *config);
      // The model fits the data's sample shape and classes (or regression targets), known
      // once --data is loaded.
      Trainer trainer(
          *config,
          [config, spec](const data::DataInfo& data) {
            return models::build_model(spec, data.sample_shape, data.outputs(),
                                       config->conv_algorithm,
                                       data.regression() ? "regression targets" : "classes");
          },
          comm);
      // A stuck rank ends the whole job (MPI_Abort), not just itself.
      trainer.set_watchdog_action([](const std::string& message) {
        const std::string line = message + "\n";  // one write: lines of ranks never interleave
        [[maybe_unused]] auto written = ::write(2, line.data(), line.size());
        MPI_Abort(MPI_COMM_WORLD, 3);
      });
      trainer.set_fault_injector(make_scripted_faults(*faults));
      const TrainResults results = trainer.run();
      if (on_results) on_results(results.to_json());
      return results.stop_signal == SIGINT ? 128 + SIGINT : 0;  // Ctrl-C: the shell's 130
    };
  });
}

}  // namespace ringtrain::cli
