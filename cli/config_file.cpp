// The --config reader (see config_file.hpp).
#include "config_file.hpp"

#include <fstream>

#include <fmt/format.h>

#include "ringtrain/framework/error.hpp"

namespace ringtrain::cli {
namespace {

std::string trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  const auto end = s.find_last_not_of(" \t\r");
  return s.substr(begin, end - begin + 1);
}

// The flags one file stands for, in file order.
std::vector<std::string> read_file(const std::string& path, CLI::App& sub) {
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("--config {}: cannot read the file", path));
  std::vector<std::string> flags;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    // strip a comment that is not inside a string
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '"') quoted = !quoted;
      if (line[i] == '#' && !quoted) {
        line.resize(i);
        break;
      }
    }
    line = trim(line);
    if (line.empty()) continue;
    const auto where = fmt::format("--config {} line {}", path, number);
    const auto eq = line.find('=');
    if (eq == std::string::npos || line.front() == '[')
      throw UsageError(fmt::format("{}: expected `key = value`, got '{}'", where, line));
    const std::string key = trim(line.substr(0, eq));
    std::string value = trim(line.substr(eq + 1));
    if (key == "config" || sub.get_option_no_throw("--" + key) == nullptr)
      throw UsageError(fmt::format("{}: unknown key '{}' (keys are the flag names of `ringtrain {}`, "
                                   "see --help)", where, key, sub.get_name()));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    } else if (value == "true" || value == "false") {
      if (value == "true") flags.push_back("--" + key);
      continue;
    } else if (value.empty() || value.front() == '"') {
      throw UsageError(fmt::format("{}: value of '{}' must be a number, a \"string\" or true/false",
                                   where, key));
    }
    flags.push_back("--" + key + "=" + value);
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
