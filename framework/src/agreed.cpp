// Failing together (agreed.hpp).
#include "ringtrain/framework/agreed.hpp"

#include <span>
#include <vector>

#include "ringtrain/collectives/small.hpp"

namespace ringtrain {

std::optional<std::string> agree_on_failure(const collectives::Communicator& comm,
                                            const std::optional<std::string>& mine) {
  double failed[1] = {mine ? 1.0 : 0.0};
  if (comm.size() > 1) collectives::allreduce_sum(comm, std::span<double>(failed));
  if (failed[0] == 0.0) return std::nullopt;
  std::string message = mine ? *mine : "failed on another rank (rank 0 says why)";
  if (comm.size() > 1) {
    // Each rank's failure, marked so that an empty message still counts: "!" + message.
    const std::vector<std::string> all = collectives::gather_text(comm, mine ? "!" + *mine : "");
    for (const std::string& text : all)
      if (!text.empty()) {
        message = text.substr(1);
        break;
      }
  }
  return message;
}

}  // namespace ringtrain
