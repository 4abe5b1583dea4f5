// Error feedback (error_feedback.hpp): the residual is handed to the next step's gradient.
#include "ringtrain/collectives/error_feedback.hpp"

#include <algorithm>
#include <string>

#include "ringtrain/collectives/communicator.hpp"

namespace ringtrain::collectives {

namespace {

void check_size(std::size_t expected, std::size_t got, const char* what) {
  if (expected != got)
    throw CollectiveError(std::string("ErrorFeedback: ") + what + " has " + std::to_string(got) +
                          " elements, the residual " + std::to_string(expected));
}

}  // namespace

void ErrorFeedback::add_to(std::span<float> gradient, std::size_t offset) {
  if (offset > residual_.size() || gradient.size() > residual_.size() - offset)
    throw CollectiveError("ErrorFeedback: elements [" + std::to_string(offset) + ", " +
                          std::to_string(offset + gradient.size()) +
                          ") lie outside the residual of " + std::to_string(residual_.size()));
  float* residual = residual_.data() + offset;
  for (std::size_t i = 0; i < gradient.size(); ++i) {
    gradient[i] += residual[i];
    residual[i] = 0.0f;
  }
}

void ErrorFeedback::clear() {
  std::fill(residual_.begin(), residual_.end(), 0.0f);
}

void ErrorFeedback::restore(std::span<const float> saved) {
  check_size(residual_.size(), saved.size(), "the saved residual");
  std::copy(saved.begin(), saved.end(), residual_.begin());
}

}  // namespace ringtrain::collectives
