// bf16 conversions (bf16.hpp): to_bf16 against an independent round-to-nearest-even oracle
// (fp64 distances to the two bf16 neighbours), and the scalar and AVX-512 bulk kernels
// against each other, bit for bit, on every upper half of a float with the lower halves that
// decide rounding (0, 1, just below, at and above the midpoint, all ones): that covers ties,
// subnormals, ±0, ±inf, NaNs and the largest finite value's rounding edge. Then random data
// at every tail length of the 16-lane loop, and every bf16 value decoded.
#include "ringtrain/collectives/bf16.hpp"

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "ringtrain/collectives/communicator.hpp"

using namespace ringtrain::collectives;

namespace {

// Round to nearest, ties to even, from the definition: of the two bf16 values around x (the
// truncation and the next one away from zero, 2^128 standing in beyond the largest finite),
// take the nearer; at equal distance the one whose last bit is 0.
Bf16 oracle_bf16(float x) {
  const auto u = std::bit_cast<std::uint32_t>(x);
  if (std::isnan(x)) return static_cast<Bf16>((u >> 16) | 0x0040u);
  const auto below = static_cast<Bf16>(u >> 16);
  if ((u & 0xffffu) == 0) return below;
  const auto above = static_cast<Bf16>(below + 1);
  const double lo = std::fabs(static_cast<double>(from_bf16(below)));
  const double hi = (above & 0x7fffu) == 0x7f80u ? std::ldexp(1.0, 128)
                                                 : std::fabs(static_cast<double>(from_bf16(above)));
  const double ax = std::fabs(static_cast<double>(x));
  if (ax - lo < hi - ax) return below;
  if (ax - lo > hi - ax) return above;
  return (below & 1u) == 0 ? below : above;
}

// Every upper half with the lower halves that decide the rounding.
std::vector<float> edge_floats() {
  const std::uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};
  std::vector<float> values;
  values.reserve(65536 * std::size(lows));
  for (std::uint32_t high = 0; high < 65536; ++high)
    for (std::uint32_t low : lows) values.push_back(std::bit_cast<float>(high << 16 | low));
  return values;
}

std::vector<float> random_floats(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> values(n);
  for (float& v : values) v = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
  return values;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) return false;
  return true;
}

// The same bits, except that a NaN matches any NaN: when both operands of an addition are NaN,
// which payload comes out depends on the operand order the compiler picked.
bool same_sums(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const bool both_nan = std::isnan(a[i]) && std::isnan(b[i]);
    if (!both_nan && std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i]))
      return false;
  }
  return true;
}

}  // namespace

TEST_CASE("to_bf16: round to nearest even, as the definition says") {
  std::size_t mismatches = 0;
  for (float x : edge_floats()) mismatches += to_bf16(x) != oracle_bf16(x);
  for (float x : random_floats(1 << 16, 7)) mismatches += to_bf16(x) != oracle_bf16(x);
  CHECK(mismatches == 0);
  // The named cases, in words: a tie goes to the even neighbour, above it goes up; the
  // largest finite float rounds to inf; the largest subnormal rounds up to the smallest
  // normal; a signalling NaN comes out quiet.
  CHECK(to_bf16(std::bit_cast<float>(0x3f808000u)) == 0x3f80);
  CHECK(to_bf16(std::bit_cast<float>(0x3f818000u)) == 0x3f82);
  CHECK(to_bf16(std::bit_cast<float>(0x3f808001u)) == 0x3f81);
  CHECK(to_bf16(std::bit_cast<float>(0x7f7f7fffu)) == 0x7f7f);
  CHECK(to_bf16(std::bit_cast<float>(0x7f7f8000u)) == 0x7f80);
  CHECK(to_bf16(std::bit_cast<float>(0xff7fffffu)) == 0xff80);
  CHECK(to_bf16(std::bit_cast<float>(0x007fffffu)) == 0x0080);
  CHECK(to_bf16(std::bit_cast<float>(0x00008000u)) == 0x0000);
  CHECK(std::isnan(from_bf16(to_bf16(std::bit_cast<float>(0x7f800001u)))));
  CHECK((to_bf16(std::bit_cast<float>(0x7f800001u)) & 0x0040) != 0);
}

TEST_CASE("bf16 kernels: scalar and AVX-512 give the same bits") {
  if (!bf16_avx512_supported()) {
    WARN("this CPU has no AVX-512F/BW/VL: only the scalar kernels run here");
    return;
  }
  std::vector<float> values = edge_floats();
  const std::vector<float> random = random_floats(4099, 11);
  values.insert(values.end(), random.begin(), random.end());
  std::vector<Bf16> scalar(values.size()), vector(values.size());
  encode_bf16(values, scalar, Bf16Kernels::kScalar);
  encode_bf16(values, vector, Bf16Kernels::kAvx512);
  CHECK(scalar == vector);
  std::size_t off_reference = 0;
  for (std::size_t i = 0; i < values.size(); ++i) off_reference += scalar[i] != to_bf16(values[i]);
  CHECK(off_reference == 0);

  // Every bf16 value decoded, and added onto random floats.
  std::vector<Bf16> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<Bf16>(i);
  std::vector<float> decoded_scalar(all.size()), decoded_vector(all.size());
  decode_bf16(all, decoded_scalar, Bf16Kernels::kScalar);
  decode_bf16(all, decoded_vector, Bf16Kernels::kAvx512);
  CHECK(same_bits(decoded_scalar, decoded_vector));
  std::vector<float> sum_scalar = random_floats(all.size(), 13), sum_vector = sum_scalar;
  add_bf16(all, sum_scalar, Bf16Kernels::kScalar);
  add_bf16(all, sum_vector, Bf16Kernels::kAvx512);
  CHECK(same_sums(sum_scalar, sum_vector));
}

TEST_CASE("bf16 kernels: every tail length, nothing written past the end") {
  const Bf16Kernels kernels = bf16_avx512_supported() ? Bf16Kernels::kAvx512 : Bf16Kernels::kScalar;
  for (std::size_t n = 0; n <= 40; ++n) {
    const std::vector<float> values = random_floats(n, static_cast<std::uint32_t>(n));
    std::vector<Bf16> bits(n + 1, 0xabcd);  // one sentinel beyond the end
    encode_bf16(values, std::span<Bf16>(bits).first(n), kernels);
    std::vector<float> back(n + 1, 42.0f), sum(n + 1, 1.0f);
    decode_bf16(std::span<const Bf16>(bits).first(n), std::span<float>(back).first(n), kernels);
    add_bf16(std::span<const Bf16>(bits).first(n), std::span<float>(sum).first(n), kernels);
    bool ok = bits[n] == 0xabcd && back[n] == 42.0f && sum[n] == 1.0f;
    for (std::size_t i = 0; i < n; ++i) {
      ok = ok && bits[i] == to_bf16(values[i]);
      ok = ok && std::bit_cast<std::uint32_t>(back[i]) ==
                     std::bit_cast<std::uint32_t>(from_bf16(bits[i]));
      const float expected = 1.0f + from_bf16(bits[i]);
      ok = ok && std::bit_cast<std::uint32_t>(sum[i]) == std::bit_cast<std::uint32_t>(expected);
    }
    INFO("n = " << n);
    CHECK(ok);
  }
}

TEST_CASE("bf16 kernels: spans of different lengths are refused") {
  std::vector<float> values(3);
  std::vector<Bf16> bits(2);
  CHECK_THROWS_AS(encode_bf16(values, bits), CollectiveError);
  CHECK_THROWS_AS(decode_bf16(bits, values), CollectiveError);
  CHECK_THROWS_AS(add_bf16(bits, values), CollectiveError);
}
