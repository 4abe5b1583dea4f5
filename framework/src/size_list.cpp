// Lists of whole numbers as flags take them (size_list.hpp).
#include "ringtrain/framework/size_list.hpp"

#include <fmt/format.h>

#include "ringtrain/framework/error.hpp"

namespace ringtrain {

std::vector<std::size_t> parse_size_list(const std::string& text, const std::string& flag) {
  std::vector<std::size_t> values;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    std::size_t used = 0;
    unsigned long long v = 0;
    try {
      v = std::stoull(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || item[0] == '-' || item[0] == '+')
      throw UsageError(fmt::format("{} {}: '{}' is not a whole number", flag, text, item));
    values.push_back(static_cast<std::size_t>(v));
    start = comma + 1;
  }
  return values;
}

}  // namespace ringtrain
