// GradientReducer's summed pieces (gradient_reducer.hpp), at N = 1, 2, 3. A bucket's piece
// comes back in smaller pieces only so that the main thread can poll the rings still in
// flight between their updates; each update wakes the rank's threads (optimizer.hpp), so
// with nothing to poll a bucket comes back in one piece:
//   - every element of this rank's shard comes back exactly once, in pieces or not;
//   - at N = 1 (no ring is ever in flight) and with the progress thread (which polls instead
//     of the main thread), one call per bucket;
//   - the bucket updated last, when no other ring is in flight, comes back in one piece.
#include "train/sum/gradient_reducer.hpp"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <optional>
#include <vector>

#include "mpi_test.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;
namespace coll = collectives;

namespace {

// Two tensors of 300 and 200 floats in layers 0 and 1, each its own bucket (cap 1200 bytes),
// updated in pieces of 64 elements while the main thread has rings to poll.
ParameterStore two_tensors() {
  ParameterStore params;
  params.add("a", ParamSpec{"a", Shape{300}}, 0);
  params.add("b", ParamSpec{"b", Shape{200}}, 1);
  params.finalize();
  for (float& g : params.grads()) g = 1.0f;
  return params;
}

struct Call {
  std::size_t offset, count;
};

// The bucket of `buckets` that holds flat element `i`.
std::size_t bucket_of(const std::vector<coll::Bucket>& buckets, std::size_t i) {
  for (std::size_t b = 0; b < buckets.size(); ++b)
    if (buckets[b].offset <= i && i < buckets[b].offset + buckets[b].elements) return b;
  return buckets.size();
}

}  // namespace

TEST_CASE("a bucket comes back in pieces only while the main thread has rings to poll") {
  coll::Communicator comm;
  const int N = comm.size();
  Facts facts;
  for (const PollDriver driver : {PollDriver::kLayers, PollDriver::kThread})
    for (const bool zero : {false, true}) {
      const std::string where =
          fmt::format("N = {}, driver {}, zero {}", N, to_string(driver), zero);
      ParameterStore params = two_tensors();
      ReducerOptions options;
      options.cap_bytes = 300 * sizeof(float);
      options.update_piece_elements = 64;
      options.overlap = true;
      options.driver = driver;
      options.zero = zero;
      GradientReducer reducer(comm, params, options, nullptr);
      reducer.begin_step(true, 1);
      reducer.layer_done(1);
      reducer.layer_done(0);
      std::vector<Call> calls;
      std::vector<int> updates(params.num_elements(), 0);
      const bool applied = reducer.finish(true);
      facts.check(applied, where + ": the step is not applied");
      if (applied)
        while (const std::optional<ShardPiece> piece = reducer.next_summed()) {
          calls.push_back({piece->flat_offset, piece->count});
          for (std::size_t i = piece->flat_offset; i < piece->flat_offset + piece->count; ++i)
            ++updates[i];
        }

      // Exactly once: every element (no ZeRO), or this rank's chunk of each bucket (ZeRO-1).
      const auto& buckets = reducer.buckets();
      std::size_t mine = 0, twice = 0;
      for (int u : updates) {
        mine += u > 0;
        twice += u > 1;
      }
      facts.check(mine == reducer.shard().elements() && twice == 0,
                  fmt::format("{}: {} elements updated ({} more than once), the shard has {}",
                              where, mine, twice, reducer.shard().elements()));

      std::vector<std::size_t> calls_per_bucket(buckets.size(), 0);
      for (const Call& c : calls) ++calls_per_bucket[bucket_of(buckets, c.offset)];
      const bool nothing_to_poll = N == 1 || driver == PollDriver::kThread;
      for (std::size_t b = 0; b < buckets.size(); ++b)
        if (nothing_to_poll && calls_per_bucket[b] > 1)
          facts.check(false, fmt::format("{}: bucket {} updated in {} calls, with no ring to poll",
                                         where, b, calls_per_bucket[b]));
      // With ZeRO-1 the all-gathers of earlier buckets may still be in flight at the last one.
      if (!zero && !calls.empty()) {
        const std::size_t last = bucket_of(buckets, calls.back().offset);
        facts.check(calls_per_bucket[last] == 1,
                    fmt::format("{}: the bucket updated last took {} pieces, no ring in flight",
                                where, calls_per_bucket[last]));
      }
    }
  REQUIRE_ALL_RANKS(facts);
}
