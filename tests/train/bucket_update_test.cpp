// The reducer's pure pieces, without MPI:
//   - update_in_pieces (optimizer_shard.hpp) calls the update on every element of this rank's
//     piece exactly once, in order, with matching state offsets, for piece sizes around the
//     edges, and polls after each call;
//   - updates_per_bucket (gradient_reducer.hpp) says what its comment says in each mode;
//   - all_finite (step_agreement.hpp) finds a NaN or ±inf at every position, in the
//     vectorised part and in the tail.

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "ringtrain/framework/train/gradient_reducer.hpp"
#include "ringtrain/framework/train/optimizer_shard.hpp"
#include "ringtrain/framework/train/step_agreement.hpp"

using namespace ringtrain;

TEST_CASE("update_in_pieces covers the piece once, in order, polling after each call") {
  for (const std::size_t count : {0, 1, 7, 64}) {
    // A piece of the flat buffer at 100 whose state starts at 30: a shard's piece.
    const ShardPiece mine{100, count, 30};
    for (const std::size_t piece :
         {std::size_t{0}, std::size_t{1}, std::size_t{3}, count == 0 ? 1 : count - 1, count,
          count + 1, std::size_t(-1)}) {
      std::vector<int> seen(200, 0);
      std::size_t next = 100, calls = 0, polls = 0;
      bool ok = true;
      update_in_pieces(
          mine, piece,
          [&](std::size_t offset, std::size_t n, std::size_t state_offset) {
            ok = ok && offset == next && n >= 1 && n <= std::max<std::size_t>(piece, 1) &&
                 state_offset == offset - 70 && polls == calls;
            for (std::size_t i = offset; i < offset + n; ++i) ++seen[i];
            next = offset + n;
            ++calls;
          },
          [&] { ++polls; });
      INFO("count " << count << ", piece " << piece);
      CHECK(ok);
      CHECK(polls == calls);
      CHECK(next == 100 + count);
      for (std::size_t i = 0; i < seen.size(); ++i)
        CHECK(seen[i] == (i >= 100 && i < 100 + count ? 1 : 0));
      if (piece >= count && count > 0) CHECK(calls == 1);
    }
  }
}

TEST_CASE("updates_per_bucket: always with ZeRO-1, with overlap if asked, never otherwise") {
  for (const bool zero : {false, true})
    for (const bool overlap : {false, true})
      for (const bool asked : {false, true}) {
        ReducerOptions options;
        options.zero = zero;
        options.overlap = overlap;
        options.update_per_bucket = asked;
        INFO("zero " << zero << ", overlap " << overlap << ", update_per_bucket " << asked);
        const bool expected = zero ? true : overlap ? asked : false;
        CHECK(updates_per_bucket(options, overlap) == expected);
        CHECK(updates_per_bucket(options) == expected);
        // The step's mode decides, not the run's: a blocking step of an overlapping run.
        CHECK(updates_per_bucket(options, false) == zero);
      }
}

TEST_CASE("all_finite finds NaN, +inf and -inf at every position") {
  const float bad_values[] = {NAN, INFINITY, -INFINITY};
  for (std::size_t n = 0; n <= 19; ++n) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = (i % 2 ? -1.0f : 1.0f) * 3.0e38f;  // large, finite
    CHECK(all_finite(v));
    for (std::size_t i = 0; i < n; ++i)
      for (const float bad : bad_values) {
        const float keep = v[i];
        v[i] = bad;
        INFO("n " << n << ", position " << i << ", value " << bad);
        CHECK(!all_finite(v));
        v[i] = keep;
      }
  }
}
