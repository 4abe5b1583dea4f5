// libFuzzer target: a --config file from untrusted bytes, expanded against a `train`
// subcommand with options of each kind (number, string, flag, list). Every outcome but a
// ringtrain::Error or a normal return is a finding.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "config_file.hpp"
#include "fuzz_input.hpp"
#include "ringtrain/framework/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  CLI::App app{"fuzz"};
  CLI::App* train = app.add_subcommand("train");
  int steps = 0;
  double lr = 0;
  std::string model;
  bool quiet = false;
  std::vector<int> local_batches;
  train->add_option("--steps", steps);
  train->add_option("--lr", lr);
  train->add_option("--model", model);
  train->add_flag("--quiet", quiet);
  train->add_option("--local-batches", local_batches)->delimiter(',');
  const auto file = ringtrain::fuzz::write_input("config.toml", data, size);
  try {
    std::vector<std::string> args =
        ringtrain::cli::expand_config_files({"ringtrain", "train", "--config", file.string()}, app);
    args.erase(args.begin());
    std::reverse(args.begin(), args.end());  // CLI11 takes them last one first, as main does
    app.parse(args);
  } catch (const ringtrain::Error&) {
  } catch (const CLI::ParseError&) {
  }
  return 0;
}
