// Replica check (see replica_check.hpp).
#include "train/safety/replica_check.hpp"

#include <fmt/format.h>

#include <cstring>

#include "ringtrain/collectives/small.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/random.hpp"

namespace ringtrain {

std::uint64_t hash_bits(std::span<const float> values) {
  // Four independent lanes keep the multiply chains short; combined at the end.
  std::uint64_t lane[4] = {1, 2, 3, 4};
  std::size_t i = 0;
  for (; i + 4 <= values.size(); i += 4)
    for (int k = 0; k < 4; ++k) {
      std::uint32_t bits;
      std::memcpy(&bits, &values[i + std::size_t(k)], sizeof bits);
      lane[k] = random::mix64(lane[k] ^ bits);
    }
  for (; i < values.size(); ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, &values[i], sizeof bits);
    lane[0] = random::mix64(lane[0] ^ bits);
  }
  return random::hash({lane[0], lane[1], lane[2], lane[3], values.size()});
}

void check_replicas(const collectives::Communicator& comm, const ParameterStore& store,
                    const char* what, std::uint64_t step) {
  if (comm.size() == 1) return;
  std::uint64_t lo = 0, hi = 0;
  collectives::allreduce_min_max(comm, hash_bits(store.values()), lo, hi);
  if (lo == hi) return;
  // They differ: find the first entry whose hash is not the same on every rank.
  for (std::size_t p = 0; p < store.count(); ++p) {
    const ParameterEntry& e = store.entry(p);
    collectives::allreduce_min_max(comm, hash_bits(store.values().subspan(e.offset, e.size)), lo,
                                   hi);
    if (lo != hi)
      throw AgreedError(fmt::format(
          "replicas diverged at step {}: {} '{}' is not bitwise the same on all {} ranks "
          "(every rank must apply the same update; this is a bug or a hardware fault)",
          step, what, e.name, comm.size()));
  }
  throw AgreedError(
      fmt::format("replicas diverged at step {}: {} differ across ranks", step, what));
}

void check_replicas(const collectives::Communicator& comm, const Sequential& model,
                    bool per_rank_bn, std::uint64_t step) {
  check_replicas(comm, model.parameters(), "parameter", step);
  if (!per_rank_bn) check_replicas(comm, model.buffers(), "buffer", step);
}

}  // namespace ringtrain
