// Suggestions for mistyped subcommands and flags (near_miss.hpp).
#include "near_miss.hpp"

#include <algorithm>

namespace ringtrain::cli {
namespace {

// Optimal string alignment distance: Levenshtein plus the swap of two neighbours.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// The long names (without "--") of the options users see; hidden test flags are left out.
std::vector<std::string> visible_flags(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options())
    if (!option->get_group().empty())
      for (const std::string& name : option->get_lnames()) names.push_back(name);
  return names;
}

bool names_an_option(const CLI::App& app, const std::string& name) {
  for (const CLI::Option* option : app.get_options())
    if (option->check_lname(name)) return true;
  return false;
}

}  // namespace

std::string nearest_name(const std::string& typed, const std::vector<std::string>& known) {
  const std::size_t limit = std::clamp<std::size_t>(typed.size() / 3, 1, 3);
  std::string best;
  std::size_t best_distance = limit + 1;
  for (const std::string& name : known) {
    const std::size_t distance = edit_distance(typed, name);
    if (distance < best_distance) best = name, best_distance = distance;
  }
  if (!best.empty()) return best;
  std::vector<std::string> starting;
  for (const std::string& name : known)
    if (!typed.empty() && name.rfind(typed, 0) == 0) starting.push_back(name);
  return starting.size() == 1 ? starting[0] : "";
}

std::string near_miss_hint(const CLI::App& app, const std::vector<std::string>& args) {
  const std::vector<const CLI::App*> subs =
      app.get_subcommands([](const CLI::App*) { return true; });
  std::vector<std::string> commands;
  for (const CLI::App* s : subs) commands.push_back(s->get_name());
  const CLI::App* sub = nullptr;
  std::string hint;
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (!sub && arg.rfind("-", 0) != 0) {  // the first word names the subcommand
      const auto found = std::find(commands.begin(), commands.end(), arg);
      if (found != commands.end())
        sub = subs[std::size_t(found - commands.begin())];
      else if (const std::string near = nearest_name(arg, commands); !near.empty())
        hint += " (did you mean " + near + "?)";
      if (!sub) return hint;
      continue;
    }
    if (!sub || arg.rfind("--", 0) != 0) continue;
    const std::string name = arg.substr(2, arg.find('=') - 2);
    if (name.empty() || names_an_option(*sub, name)) continue;
    if (const std::string near = nearest_name(name, visible_flags(*sub)); !near.empty())
      hint += " (did you mean --" + near + "?)";
  }
  return hint;
}

}  // namespace ringtrain::cli
