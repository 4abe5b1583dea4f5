// PollDriver: who advances the gradient rings that backward starts (ring_poller.hpp
// says how each one works). A header of its own so that the options table can name it
// without the reducer.
#pragma once

#include <string>

namespace ringtrain {

enum class PollDriver { kLayers, kThread };
std::string to_string(PollDriver driver);
PollDriver parse_poll_driver(const std::string& name);  // "layers" | "thread"

}  // namespace ringtrain
