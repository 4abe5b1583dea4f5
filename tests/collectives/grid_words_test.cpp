// The grid sum's conversions (collectives/src/grid_words.hpp): the AVX2 and AVX-512 copies give
// the portable loops' bits, word for word and float for float, on every group size of terms
// (1 to 9), every tail length around the vectors' widths, words written or added to, terms at
// ties, zeros, subnormals, just below the bound, and the bound's check (a term at the bound,
// an infinity, a NaN) with the same answer. Copies this CPU cannot run are reported, not run.
#include "grid_words.hpp"

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "random_floats.hpp"

namespace gw = ringtrain::collectives::grid_words;
using ringtrain::testing::mix;

namespace {

constexpr int kWordBits = 51;

// A term below 2^power from a key: random fraction bits, an exponent anywhere in the 40 binades
// below the bound, now and then an edge: zero, minus zero, a subnormal, the largest float below
// the bound, or a tie of the grid (an odd multiple of half its step).
float term(std::uint64_t key, int power, int grid) {
  const std::uint64_t h = mix(key);
  const float sign = (h >> 63) ? -1.0f : 1.0f;
  switch (h % 16) {
    case 0:
      return 0.0f;
    case 1:
      return -0.0f;
    case 2:
      return sign * std::bit_cast<float>(static_cast<std::uint32_t>(1 + (h >> 8) % 0x7fffff));
    case 3:
      return sign * std::nextafter(std::ldexp(1.0f, power), 0.0f);
    case 4: {  // (2j + 1) · 2^(grid − 1): a tie, where it is a float below the bound
      const float tie = std::ldexp(float(2 * ((h >> 8) % 64) + 1), grid - 1);
      if (std::isfinite(tie) && std::fabs(tie) < std::ldexp(1.0f, power) && tie != 0.0f)
        return sign * tie;
      return 0.0f;
    }
    default: {
      const auto fraction = static_cast<std::uint32_t>((h >> 8) & 0x7fffff);
      const int exponent = std::max(power - 1 - static_cast<int>((h >> 32) % 40), -126);
      return sign * std::ldexp(1.0f + float(fraction) * 0x1p-23f, exponent);
    }
  }
}

struct Case {
  std::size_t count, n;
  int power;
  bool first;
};

// The words and the bound's answer of one copy.
struct Result {
  std::vector<std::int64_t> words;
  bool inside;
};

Result convert(gw::Isa isa, const Case& c, const std::vector<float>& x, std::size_t stride,
               const std::vector<std::int64_t>& start) {
  int bits = 0;
  while ((std::size_t{1} << bits) < c.count) ++bits;
  const int grid = c.power - (kWordBits - bits);
  const float limit =
      c.power == 128 ? std::numeric_limits<float>::infinity() : std::ldexp(1.0f, c.power);
  Result r{start, false};
  r.inside = gw::add_terms(isa, x.data(), stride, c.count, c.n, std::ldexp(1.0, -grid), limit,
                           c.first, r.words.data());
  return r;
}

std::vector<gw::Isa> vector_copies() {
  std::vector<gw::Isa> copies;
  for (gw::Isa isa : {gw::Isa::kAvx2, gw::Isa::kAvx512}) {
    if (gw::runs(isa))
      copies.push_back(isa);
    else
      WARN(gw::name(isa) << " is not run: this CPU lacks it");
  }
  return copies;
}

}  // namespace

TEST_CASE("grid words: every copy rounds terms onto the grid with the portable loops' bits",
          "[grid_words]") {
  std::uint64_t key = 1;
  for (gw::Isa isa : vector_copies()) {
    for (int power : {-120, -20, 0, 7, 60, 127}) {
      for (std::size_t count = 1; count <= 9; ++count) {
        for (std::size_t n : {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 4101}) {
          const std::size_t stride = n + 3;  // pieces apart, as a layer's tiles lie
          int bits = 0;
          while ((std::size_t{1} << bits) < count) ++bits;
          const int grid = power - (kWordBits - bits);
          std::vector<float> x(count * stride);
          for (float& v : x) v = term(++key, power, grid);
          std::vector<std::int64_t> start(n);
          for (auto& w : start) w = static_cast<std::int64_t>(mix(++key) >> 14) - (1ll << 49);
          for (bool first : {true, false}) {
            const Case c{count, n, power, first};
            INFO(gw::name(isa) << ": power " << power << ", " << count << " terms, " << n
                               << " elements, first " << first);
            const Result want = convert(gw::Isa::kBaseline, c, x, stride, start);
            const Result got = convert(isa, c, x, stride, start);
            REQUIRE(want.inside);
            REQUIRE(got.inside);
            REQUIRE(got.words == want.words);
          }
        }
      }
    }
  }
}

TEST_CASE("grid words: a term at its bound, an infinity or a NaN is reported by every copy",
          "[grid_words]") {
  for (gw::Isa isa : vector_copies()) {
    for (std::size_t n : {1, 8, 16, 17, 40}) {
      for (float bad :
           {std::ldexp(1.0f, 5), -std::ldexp(1.0f, 6), std::numeric_limits<float>::infinity(),
            std::numeric_limits<float>::quiet_NaN()}) {
        for (std::size_t at = 0; at < n; at += 7) {
          std::vector<float> x(3 * n, 0.25f);
          x[2 * n + at] = bad;  // the third term
          INFO(gw::name(isa) << ": " << bad << " at " << at << " of " << n);
          const Case c{3, n, 5, true};
          const std::vector<std::int64_t> start(n);
          REQUIRE_FALSE(convert(gw::Isa::kBaseline, c, x, n, start).inside);
          REQUIRE_FALSE(convert(isa, c, x, n, start).inside);
        }
      }
    }
  }
}

TEST_CASE("grid words: every copy rounds words back to float32 with the portable loop's bits",
          "[grid_words]") {
  std::uint64_t key = 7;
  for (gw::Isa isa : vector_copies()) {
    // grids whose results are normal, subnormal (below 2^-126), zero and overflowing
    for (int grid : {-190, -175, -160, -120, -60, 0, 40, 76, 77, 90}) {
      for (std::size_t n : {0, 1, 7, 8, 15, 16, 17, 33, 1000}) {
        std::vector<std::int64_t> words(n);
        for (std::size_t i = 0; i < n; ++i) {
          const std::uint64_t h = mix(++key);
          const int width = static_cast<int>(h % 52);  // any magnitude up to 2^51
          const auto magnitude = static_cast<std::int64_t>((h >> 8) & ((1ull << width) - 1));
          words[i] = (h >> 7) & 1 ? -magnitude : magnitude;
        }
        if (n > 2) words[1] = 1ll << 51, words[2] = -(1ll << 51);
        std::vector<float> want(n, 1.0f), got(n, 2.0f);
        gw::round(gw::Isa::kBaseline, words.data(), n, grid, want.data());
        gw::round(isa, words.data(), n, grid, got.data());
        INFO(gw::name(isa) << ": grid " << grid << ", " << n << " words");
        bool same = true;
        for (std::size_t i = 0; i < n; ++i)
          same =
              same && std::bit_cast<std::uint32_t>(got[i]) == std::bit_cast<std::uint32_t>(want[i]);
        REQUIRE(same);
      }
    }
  }
}
