// The reducer's pure pieces, without MPI:
//   - piece_after (optimizer_shard.hpp) cuts this rank's piece into update pieces that cover
//     every element exactly once, in order, with matching state offsets, for piece sizes
//     around the edges;
//   - updates_per_bucket (gradient_reducer.hpp) says what its comment says in each mode;
//   - all_finite (step_agreement.hpp) finds a NaN or ±inf at every position, in the
//     vectorised part and in the tail.

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "ringtrain/framework/train/optimizer_shard.hpp"
#include "train/sum/gradient_reducer.hpp"
#include "train/sum/step_agreement.hpp"

using namespace ringtrain;

TEST_CASE("piece_after covers the piece once, in order, with matching state offsets") {
  for (const std::size_t count : {0, 1, 7, 64}) {
    // A piece of the flat buffer at 100 whose state starts at 30: a shard's piece.
    const ShardPiece mine{100, count, 30};
    for (const std::size_t piece :
         {std::size_t{0}, std::size_t{1}, std::size_t{3}, count == 0 ? 1 : count - 1, count,
          count + 1, std::size_t(-1)}) {
      std::vector<int> seen(200, 0);
      std::size_t next = 100, calls = 0, done = 0;
      bool ok = true;
      for (ShardPiece p = piece_after(mine, done, piece); p.count > 0;
           p = piece_after(mine, done, piece)) {
        ok = ok && p.flat_offset == next && p.count <= std::max<std::size_t>(piece, 1) &&
             p.shard_offset == p.flat_offset - 70;
        for (std::size_t i = p.flat_offset; i < p.flat_offset + p.count; ++i) ++seen[i];
        next = p.flat_offset + p.count;
        done += p.count;
        ++calls;
      }
      INFO("count " << count << ", piece " << piece);
      CHECK(ok);
      CHECK(next == 100 + count);
      for (std::size_t i = 0; i < seen.size(); ++i)
        CHECK(seen[i] == (i >= 100 && i < 100 + count ? 1 : 0));
      if (piece >= count && count > 0) CHECK(calls == 1);
      if (count == 0) CHECK(calls == 0);
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
