// The default bucket cap of `ringtrain train` (bucket_default.hpp): from the built-in fit, or
// from the JSON that `ringtrain bench allreduce --json` writes, and clear errors for a file
// that is not one.
#include "ringtrain/framework/train/bucket_default.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <vector>

#include "ringtrain/framework/error.hpp"

using namespace ringtrain;

namespace {

std::filesystem::path write_temp(const std::string& text) {
  char pattern[] = "/tmp/ringtrain-cost-XXXXXX";
  const int fd = mkstemp(pattern);
  REQUIRE(fd >= 0);
  std::ofstream(pattern) << text;
  return pattern;
}

}  // namespace

TEST_CASE("default bucket cap: built-in fits, one rank, and the reason names the fit") {
  // N=2 fit: 9 · 4.84 µs · 2 · 7.24 GB/s = 631 KB -> 1 MiB.
  const auto two = default_bucket_choice(ring_fit_for_buckets("", 2, false), 2, 7456040);
  CHECK(two.cap_bytes == 1024 * 1024);
  CHECK(two.reason.find("N=2") != std::string::npos);
  // Oversubscribed (N=4 on 2 cores): 9 · 20.7 µs · 4 · 3.43 GB/s = 2.56 MB -> 4 MiB.
  CHECK(default_bucket_choice(ring_fit_for_buckets("", 4, true), 4, 7456040).cap_bytes ==
        4 * 1024 * 1024);
  CHECK(default_bucket_choice(ring_fit_for_buckets("", 1, false), 1, 7456040).cap_bytes == 7456040);
}

TEST_CASE("default bucket cap without overlap: one bucket, whatever the fit") {
  // The mlp's parameters (784-1024-1024-10): 7,454,760 bytes.
  const std::vector<std::size_t> mlp = {802816, 1024, 1048576, 1024, 10240, 10};
  const std::size_t bytes = 4 * std::accumulate(mlp.begin(), mlp.end(), std::size_t{0});
  for (const int N : {2, 3, 4}) {
    const auto off = default_bucket_choice(ring_fit_for_buckets("", N, N > 2), N, bytes, false);
    CHECK(off.cap_bytes == bytes);
    CHECK(off.reason.find("overlap off") != std::string::npos);
    CHECK(collectives::plan_buckets(mlp, off.cap_bytes).size() == 1);
  }
  // Overlap on keeps the fit's rule.
  CHECK(default_bucket_choice(ring_fit_for_buckets("", 2, false), 2, 7456040, true).cap_bytes ==
        1024 * 1024);
}

TEST_CASE("default bucket cap from a bench allreduce JSON: the regime that holds 1 MiB") {
  const auto path = write_temp(R"({"world_size": 2, "fit": {"alpha_s": 1e-6, "bandwidth_Bps": 1e9,
      "regimes": [{"from_bytes": 4, "to_bytes": 16384, "alpha_s": 1e-6, "bandwidth_Bps": 2e9},
                  {"from_bytes": 32768, "to_bytes": 67108864, "alpha_s": 1e-5, "bandwidth_Bps": 8e9}]}})");
  const RingFit fit = ring_fit_for_buckets(path, 2, false);
  CHECK(fit.model.alpha_s == 1e-5);
  CHECK(fit.model.bandwidth_Bps == 8e9);
  CHECK(fit.source.find("32768 B .. 67108864 B") != std::string::npos);
  // 9 · 10 µs · 3 · 8 GB/s = 2.16 MB -> 4 MiB, and the reason says N differs from the fit's.
  const auto choice = default_bucket_choice(ring_fit_for_buckets(path, 3, false), 3, 1u << 30);
  CHECK(choice.cap_bytes == 4 * 1024 * 1024);
  CHECK(choice.reason.find("used at N=3") != std::string::npos);
  std::filesystem::remove(path);
}

TEST_CASE("a cost-model file without a fit is a UsageError naming the file") {
  for (const std::string& text : {std::string("not json"), std::string(R"({"rows": []})"),
                                  std::string(R"({"fit": {"alpha_s": "x"}})"),
                                  std::string(R"({"fit": {"alpha_s": -1, "bandwidth_Bps": 1}})")}) {
    const auto path = write_temp(text);
    INFO(text);
    CHECK_THROWS_AS(ring_fit_for_buckets(path, 2, false), UsageError);
    CHECK_THROWS_WITH(ring_fit_for_buckets(path, 2, false), Catch::Contains(path.string()));
    std::filesystem::remove(path);
  }
}

TEST_CASE("a cost-model file is read with typed access: each wrong value names the file and key",
          "[hostile]") {
  const struct {
    std::string text, message;
  } cases[] = {
      {R"({"fit": {"alpha_s": "fast", "bandwidth_Bps": 1e9}})",
       "fit.alpha_s: expected a number, found string"},
      {R"({"fit": {"alpha_s": 1e-6, "bandwidth_Bps": null}})",
       "fit.bandwidth_Bps: expected a number, found null"},
      {R"({"fit": {"alpha_s": 1e-6, "bandwidth_Bps": 1e9}, "world_size": 1e300})",
       "world_size = 1e+300: outside [0, 1048576]"},
      {R"({"fit": {"alpha_s": 1e-6, "bandwidth_Bps": 1e9}, "world_size": "two"})",
       "world_size: expected a number, found string"},
      {R"({"fit": {"alpha_s": 1e-6, "bandwidth_Bps": 1e9, "regimes": {"a": 1}}})",
       "fit.regimes: expected an array"},
      {R"({"fit": {"alpha_s": 1e-6, "bandwidth_Bps": 1e9, "regimes": [{"alpha_s": 1e-6,
          "bandwidth_Bps": 1e9}, {"alpha_s": 1e-6, "bandwidth_Bps": 1e9, "to_bytes": [1]}]}})",
       "fit.regimes[1].to_bytes: expected a number, found array"},
      {R"({"fit": [1, 2]})", "fit: expected an object"},
  };
  for (const auto& c : cases) {
    const auto path = write_temp(c.text);
    INFO(c.text);
    CHECK_THROWS_AS(ring_fit_for_buckets(path, 2, false), UsageError);
    CHECK_THROWS_WITH(ring_fit_for_buckets(path, 2, false),
                      Catch::Contains("--cost-model " + path.string() + ": " + c.message));
    std::filesystem::remove(path);
  }
  // A FIFO is refused at once, not waited on.
  const auto fifo = write_temp("");
  std::filesystem::remove(fifo);
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(ring_fit_for_buckets(fifo, 2, false), Catch::Contains("is a FIFO"));
  std::filesystem::remove(fifo);
}
