// ProgressDriver: who advances the gradient rings that backward starts (ring_progress.hpp
// says how each one works). A header of its own so that the options table can name it
// without the reducer.
#pragma once

#include <string>

namespace ringtrain {

enum class ProgressDriver { kLayers, kThread };
std::string to_string(ProgressDriver driver);
ProgressDriver parse_progress_driver(const std::string& name);  // "layers" | "thread"

}  // namespace ringtrain
