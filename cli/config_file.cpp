// The --config reader (see config_file.hpp): toml++ parses the file (read_config_keys in
// options.hpp), this file turns its keys into flags.
#include "config_file.hpp"

#include <fmt/format.h>

#include <fstream>
#include <iterator>

#include "ringtrain/files/escape.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/options.hpp"

namespace ringtrain::cli {
namespace {

// The flags one file stands for, in file order: `key = "text"` or `key = 12` becomes
// --key=text, `key = true` becomes --key, `key = false` nothing.
std::vector<std::string> read_file(const std::string& path, CLI::App& sub) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("--config {}: cannot read the file", path));
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<std::string> flags;
  for (const ConfigKey& k : read_config_keys(text, path)) {
    if (k.key == "config" || sub.get_option_no_throw("--" + k.key) == nullptr)
      throw UsageError(
          fmt::format("{}: unknown key '{}' (keys are the flag names of `ringtrain "
                      "{}`, see --help)",
                      k.where, files::escaped(k.key), sub.get_name()));
    // A train option's value is checked here, where the message can say where it came from.
    if (const TrainOption* option = find_train_option(k.key); option && sub.get_name() == "train") {
      TrainConfig scratch;
      try {
        option->set(scratch, k.text);
      } catch (const UsageError& e) {
        throw UsageError(fmt::format("{}: {}", k.where, e.what()));
      }
    }
    if (k.is_bool) {
      if (k.text == "true") flags.push_back("--" + k.key);
      continue;
    }
    flags.push_back("--" + k.key + "=" + k.text);
  }
  return flags;
}

CLI::App* find_subcommand(CLI::App& app, const std::string& name) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    if (sub->check_name(name)) return sub;
  return nullptr;
}

}  // namespace

std::vector<std::string> expand_config_files(const std::vector<std::string>& args, CLI::App& app) {
  std::vector<std::string> out;
  std::size_t insert_at = 0;  // right after the subcommand's name
  CLI::App* sub = nullptr;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (sub == nullptr && i > 0 && find_subcommand(app, a) != nullptr) {
      sub = find_subcommand(app, a);
      out.push_back(a);
      insert_at = out.size();
      continue;
    }
    std::string file;
    if (sub != nullptr && a == "--config") {
      if (i + 1 >= args.size()) throw UsageError("--config needs a file name");
      file = args[++i];
    } else if (sub != nullptr && a.rfind("--config=", 0) == 0) {
      file = a.substr(9);
    } else {
      out.push_back(a);
      continue;
    }
    const auto flags = read_file(file, *sub);
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(insert_at), flags.begin(), flags.end());
    insert_at += flags.size();
  }
  return out;
}

}  // namespace ringtrain::cli
