// Ranges of the numeric options (options.hpp: TrainOption::minimum, maximum; ranged()).
#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "ringtrain/files/escape.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/options.hpp"

namespace ringtrain {
namespace {

// A number as --help and the messages show it: whole numbers without a fraction.
std::string range_number(double value) {
  if (value == std::floor(value) && std::fabs(value) < 0x1p63)
    return std::to_string(static_cast<long long>(value));
  if (value == 0x1p64) return "18446744073709551615";
  return fmt::format("{}", value);
}

}  // namespace

// The range is checked by set() after the row's own parser (which names what is not a number,
// or a negative whole number); a value too large for the field's type is refused by its
// range too, not as a failed conversion.
TrainOption ranged(TrainOption o, double minimum, double maximum) {
  o.minimum = minimum;
  o.maximum = maximum;
  const std::string range = fmt::format("[{}, {}]", range_number(minimum), range_number(maximum));
  o.help += (o.help.empty() ? "range " : " (range ") + range + (o.help.empty() ? "" : ")");
  o.set = [store = std::move(o.set), flag = o.flag(), minimum, maximum, range](
              TrainConfig& c, std::string_view text) {
    double value = 0.0;
    const char* end = text.data() + text.size();
    const auto [stop, error] = std::from_chars(text.data(), end, value);
    const bool number = !text.empty() && stop == end &&
                        (error == std::errc() || error == std::errc::result_out_of_range);
    const bool too_large = number && (error != std::errc() ? text[0] != '-' : value > maximum);
    const auto outside = [&] {
      return UsageError(
          fmt::format("{} {}: outside the range {}", flag, files::escaped(text), range));
    };
    try {
      store(c, text);  // its own parse: "not a number", "not a whole number >= 0"
    } catch (const UsageError&) {
      if (too_large) throw outside();  // 1e300 for a float, 10^30 for a whole number
      throw;
    }
    if (!(value >= minimum && value <= maximum)) throw outside();
  };
  return o;
}

}  // namespace ringtrain
