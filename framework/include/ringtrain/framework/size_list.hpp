// A list of whole numbers as a flag takes it: "1024,1024" (--mlp-hidden), "1,28,28" (--input),
// "1,2,4" (a benchmark's --threads).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ringtrain {

// "1024,1024" -> {1024, 1024}; throws UsageError naming the flag on anything else (an empty
// item, a sign, a character that is not a digit).
std::vector<std::size_t> parse_size_list(const std::string& text, const std::string& flag);

}  // namespace ringtrain
